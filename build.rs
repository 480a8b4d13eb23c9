//! Build script: find the system's `fennel.lua`, and compile it and the Fennel prelude to Lua 5.4
//! bytecode that the binary embeds.
//!
//! `fennel.lua` is never committed to this repository (DESIGN §2). It is looked up in this order:
//! `$OML_FENNEL_LUA`; the usual `share/lua/5.x/` folders of a distribution's `fennel` package; the
//! project-local copy that `scripts/setup-fennel.sh` unpacks into `.deps/fennel/`. When none is
//! found the build fails with a message that says how to get one.
//!
//! The prelude (`src/lisp/prelude/*.fnl`) and the other embedded Fennel files (table `PRELUDE`)
//! are compiled here too, with the very Fennel that is embedded, so start-up loads bytecode and
//! compiles nothing.

#![allow(clippy::print_stdout)] // cargo: directives go to stdout

use std::path::{Path, PathBuf};
use std::{env, fs};

/// The oldest Fennel whose compiler API (`compile-string` options, fn metadata tables) we use.
const MIN_FENNEL: (u32, u32) = (1, 5);

/// The Fennel files compiled to bytecode, by output name (`prelude_<name>.luac`). `macros.fnl`
/// is a macro module (its chunk returns a table of macros); `host` (the compiler's options, the
/// load path and the module searcher) and `core` run at start-up, in that order, and `repl`
/// drives each REPL conversation. `agent`, `agent_discovery`, `agent_tools`, `agent_permission`,
/// `agent_plan`, `agent_delegate`, `agent_commands`, `agent_compact` and `agent_worktrees` are the
/// agent loop, the finding of its tools and commands, its tools, delegation, the slash commands,
/// compaction and `/worktrees`
/// (`src/agent/*.fnl`); the agent module
/// loads them, in this order, after installing its host functions. `llm` and `client` complete
/// the Rust functions of those namespaces (`src/bind/`). `acp` is the ACP agent's Lisp surface
/// (`src/front/acp/acp.fnl`), loaded only by `oml acp`; `chat` the terminal chat's
/// (`src/front/chat/chat.fnl`), loaded only by the chat; `mcp` completes the `mcp` namespace and is loaded
/// by the agent; `flow` is the `flow` namespace (resumable multi-step programs);
/// `proxy` the steps of `oml proxy` (`src/front/proxy/proxy.fnl`), loaded only by it.
const PRELUDE: &[(&str, &str)] = &[
    ("macros", "src/lisp/prelude/macros.fnl"),
    ("host", "src/lisp/prelude/host.fnl"),
    ("core", "src/lisp/prelude/core.fnl"),
    ("repl", "src/lisp/prelude/repl.fnl"),
    ("agent", "src/agent/agent.fnl"),
    ("agent_discovery", "src/agent/discovery.fnl"),
    ("agent_tools", "src/agent/tools.fnl"),
    ("agent_permission", "src/agent/permission.fnl"),
    ("agent_setup_rules", "src/agent/setup_rules.fnl"),
    ("agent_plan", "src/agent/plan.fnl"),
    ("agent_ask", "src/agent/ask.fnl"),
    ("agent_delegate", "src/agent/delegate.fnl"),
    ("agent_task", "src/agent/task.fnl"),
    ("agent_images", "src/agent/images.fnl"),
    ("agent_usage", "src/agent/usage.fnl"),
    ("agent_protocol", "src/agent/protocol.fnl"),
    ("agent_commands", "src/agent/commands.fnl"),
    ("agent_rewind", "src/agent/rewind.fnl"),
    ("agent_skills", "src/agent/skills.fnl"),
    ("agent_agents", "src/agent/agents.fnl"),
    ("agent_compact", "src/agent/compact.fnl"),
    ("agent_worktrees", "src/agent/worktrees.fnl"),
    ("agent_inbox", "src/agent/inbox.fnl"),
    ("agent_hooks", "src/agent/hooks.fnl"),
    ("agent_hook_steps", "src/agent/hook_steps.fnl"),
    ("agent_setup", "src/agent/setup.fnl"),
    ("llm", "src/bind/llm.fnl"),
    ("client", "src/bind/client.fnl"),
    ("acp", "src/front/acp/acp.fnl"),
    ("chat", "src/front/chat/chat.fnl"),
    ("mcp", "src/bind/mcp.fnl"),
    ("flow", "src/bind/flow.fnl"),
    ("proxy", "src/front/proxy/proxy.fnl"),
];

fn main() {
    println!("cargo:rerun-if-env-changed=OML_FENNEL_LUA");
    println!("cargo:rerun-if-changed=src/lisp/prelude");
    println!("cargo:rerun-if-changed=src/agent");
    println!("cargo:rerun-if-changed=src/front/acp/acp.fnl");
    println!("cargo:rerun-if-changed=src/front/chat/chat.fnl");
    println!("cargo:rerun-if-changed=src/bind/llm.fnl");
    println!("cargo:rerun-if-changed=src/bind/client.fnl");
    println!("cargo:rerun-if-changed=src/bind/mcp.fnl");
    println!("cargo:rerun-if-changed=src/bind/flow.fnl");
    println!("cargo:rerun-if-changed=src/front/proxy/proxy.fnl");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets this"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets this"));

    let fennel_path = match find_fennel(&manifest) {
        Some(p) => p,
        None => fail_no_fennel(),
    };
    println!("cargo:rerun-if-changed={}", fennel_path.display());
    let fennel_src = fs::read_to_string(&fennel_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", fennel_path.display()));
    check_version(&fennel_path, &fennel_src);

    // SAFETY: Fennel needs the debug library; this state only compiles our own sources.
    let lua = unsafe {
        mlua::Lua::unsafe_new_with(
            mlua::StdLib::ALL_SAFE | mlua::StdLib::DEBUG,
            mlua::LuaOptions::new(),
        )
    };
    let fennel_chunk = lua
        .load(&fennel_src)
        .set_name("@fennel.lua")
        .into_function()
        .expect("fennel.lua compiles as Lua 5.4");
    // The embedded copy gets its built-in macros as bytecode; this build uses the original.
    let (embedded_src, macro_chunks) = precompile_builtin_macros(&lua, &fennel_src);
    let embedded = lua
        .load(&embedded_src)
        .set_name("@fennel.lua")
        .into_function()
        .expect("fennel.lua with precompiled macros compiles as Lua 5.4");
    fs::write(out.join("fennel.luac"), embedded.dump(true)).expect("write fennel.luac");
    let mut list = String::from("&[");
    for (i, chunk) in macro_chunks.iter().enumerate() {
        let name = format!("fennel_macros_{i}.luac");
        fs::write(out.join(&name), chunk).expect("write macro bytecode");
        list.push_str(&format!(
            "include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{name}\")),"
        ));
    }
    list.push(']');
    fs::write(out.join("fennel_macros.rs"), list).expect("write fennel_macros.rs");

    let fennel: mlua::Table = fennel_chunk.call(()).expect("fennel.lua loads");
    let compiler_id = compile_prelude(&lua, &fennel, &fennel_src, &manifest, &out);
    fs::write(
        out.join("compiler_id.txt"),
        format!("{:016x}", std::hash::Hasher::finish(&compiler_id)),
    )
    .expect("write compiler id");
    fs::write(
        out.join("fennel_path.txt"),
        fennel_path.display().to_string(),
    )
    .expect("write fennel path");
}

/// Compile every file of [`PRELUDE`] with `fennel` to `OUT_DIR/prelude_<name>.luac`. Returns the
/// hash of what compiled user files depend on besides their own text: the compiler and the
/// prelude (whose `host.fnl` holds the compiler's options and `macros.fnl` the macros).
fn compile_prelude(
    lua: &mlua::Lua,
    fennel: &mlua::Table,
    fennel_src: &str,
    manifest: &Path,
    out: &Path,
) -> std::hash::DefaultHasher {
    let package: mlua::Table = lua.globals().get("package").expect("package table");
    let loaded: mlua::Table = package.get("loaded").expect("package.loaded");
    loaded.set("fennel", fennel).expect("register fennel");
    let compile: mlua::Function = fennel.get("compileString").expect("fennel.compileString");

    // What compiled user files depend on besides their own text: the compiler and the macros.
    // The cache of compiled Fennel (src/lisp/compile.rs) keys on this, so a changed Fennel or prelude
    // does not keep serving files compiled by the old one. Only needs to be stable within a build.
    let mut compiler_id = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&fennel_src, &mut compiler_id);
    let mut macros: Option<mlua::Table> = None;
    for (name, rel) in PRELUDE {
        let rel = rel.to_string();
        let src = fs::read_to_string(manifest.join(&rel))
            .unwrap_or_else(|e| panic!("cannot read {rel}: {e}"));
        std::hash::Hash::hash(&src, &mut compiler_id);
        let opts = lua.create_table().expect("table");
        opts.set("filename", rel.as_str()).expect("opt");
        opts.set("correlate", true).expect("opt");
        opts.set("useMetadata", true).expect("opt");
        opts.set("allowedGlobals", false).expect("opt");
        if !WITHOUT_MACROS.contains(name) {
            let macros = macros.as_ref().expect("macros.fnl comes first in PRELUDE");
            opts.set("scope", scope_with(fennel, macros)).expect("opt");
        }
        let lua_src: String = compile
            .call((src.as_str(), opts))
            .unwrap_or_else(|e| panic!("prelude {rel} does not compile:\n{e}"));
        let chunk = lua
            .load(&lua_src)
            .set_name(format!("@{rel}"))
            .into_function()
            .unwrap_or_else(|e| panic!("compiled prelude {rel} is not valid Lua: {e}"));
        fs::write(out.join(format!("prelude_{name}.luac")), chunk.dump(false))
            .expect("write prelude bytecode");
        if *name == "macros" {
            macros = Some(macro_table(lua, fennel, &src, &rel));
        }
    }
    compiler_id
}

/// The files of [`PRELUDE`] compiled without oml's macros: the macro module itself, and the
/// files that run before the macros are installed at run time (they define what the macros
/// call).
const WITHOUT_MACROS: [&str; 4] = ["macros", "host", "core", "repl"];

/// The macros of `macros.fnl`, evaluated in Fennel's compiler environment (as the host installs
/// them at run time, `src/lisp/mod.rs`), so that the built-in files declare their settings with
/// `defsetting` as an init file does.
fn macro_table(lua: &mlua::Lua, fennel: &mlua::Table, src: &str, rel: &str) -> mlua::Table {
    let eval: mlua::Function = fennel.get("eval").expect("fennel.eval");
    let opts = lua.create_table().expect("table");
    opts.set("filename", rel).expect("opt");
    opts.set("env", "_COMPILER").expect("opt");
    eval.call((src, opts))
        .unwrap_or_else(|e| panic!("{rel} does not evaluate as a macro module:\n{e}"))
}

/// The macros of `macros.fnl` the built-in files are compiled with: only those they use, so that
/// their locals may still be called `doc` or `source`.
const BUILTIN_MACROS: [&str; 1] = ["defsetting"];

/// A fresh scope holding [`BUILTIN_MACROS`] of `macros`, as `fennel.scope` makes them.
fn scope_with(fennel: &mlua::Table, macros: &mlua::Table) -> mlua::Table {
    let make: mlua::Function = fennel.get("scope").expect("fennel.scope");
    let scope: mlua::Table = make.call(()).expect("a scope");
    let scope_macros: mlua::Table = scope.get("macros").expect("scope.macros");
    for name in BUILTIN_MACROS {
        let v: mlua::Value = macros.get(name).expect("a macro");
        scope_macros.set(name, v).expect("set a macro");
    }
    scope
}

/// The global through which the embedded Fennel receives its precompiled built-in macros
/// (`src/lisp/mod.rs` sets it while Fennel loads).
const MACRO_CHUNKS_GLOBAL: &str = "__oml_fennel_macros";

/// Fennel's built-in macros ship inside `fennel.lua` as Lua source text, which `load` parses at
/// every start (about two thirds of the instructions `oml acp` runs before it answers
/// `initialize`). Here each `load_macros([===[SOURCE]===], env)` becomes
/// `load_macros(__oml_fennel_macros[N], env)`, and `load_macros` loads a binary chunk: the
/// bytecode of SOURCE compiled now, with the same chunk name. Returns the patched source and
/// the chunks; a `fennel.lua` laid out differently is returned unchanged, with no chunks.
fn precompile_builtin_macros(lua: &mlua::Lua, src: &str) -> (String, Vec<Vec<u8>>) {
    const LOADER: &str =
        r#"local chunk = assert(specials["load-code"](src, env, "src/fennel/macros.fnl"))"#;
    const BINARY_LOADER: &str =
        r#"local chunk = assert(load(src, "src/fennel/macros.fnl", "b", env))"#;
    const OPEN: &str = "load_macros([===[";
    const CLOSE: &str = "]===], env)";
    if src.matches(LOADER).count() != 1 || !src.contains(OPEN) {
        println!(
            "cargo:warning=fennel.lua is not laid out as expected; its macros load from source"
        );
        return (src.to_owned(), Vec::new());
    }
    let mut patched = String::with_capacity(src.len());
    let mut chunks = Vec::new();
    let mut rest = src;
    while let Some(start) = rest.find(OPEN) {
        let body_start = start + OPEN.len();
        let Some(len) = rest[body_start..].find(CLOSE) else {
            println!("cargo:warning=fennel.lua: an unterminated built-in macro source");
            return (src.to_owned(), Vec::new());
        };
        // A long bracket skips the newline that directly follows it.
        let body = &rest[body_start..body_start + len];
        let body = body.strip_prefix('\n').unwrap_or(body);
        let chunk = lua
            .load(body)
            .set_name("src/fennel/macros.fnl")
            .into_function()
            .expect("Fennel's built-in macros compile as Lua 5.4");
        patched.push_str(&rest[..start]);
        patched.push_str(&format!(
            "load_macros({MACRO_CHUNKS_GLOBAL}[{}], env)",
            chunks.len() + 1
        ));
        chunks.push(chunk.dump(true));
        rest = &rest[body_start + len + CLOSE.len()..];
    }
    patched.push_str(rest);
    (patched.replace(LOADER, BINARY_LOADER), chunks)
}

fn find_fennel(manifest: &Path) -> Option<PathBuf> {
    if let Some(p) = env::var_os("OML_FENNEL_LUA") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Some(p);
        }
        panic!("OML_FENNEL_LUA={} is not a file", p.display());
    }
    let mut prefixes: Vec<PathBuf> = [
        "/usr",
        "/usr/local",
        "/opt/homebrew",
        "/run/current-system/sw",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Some(home) = env::var_os("HOME") {
        prefixes.push(PathBuf::from(home).join(".nix-profile"));
    }
    for v in ["5.4", "5.3", "5.2", "5.1"] {
        for prefix in &prefixes {
            let p = prefix.join("share/lua").join(v).join("fennel.lua");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let local = manifest.join(".deps/fennel/usr/share/lua/5.4/fennel.lua");
    local.is_file().then_some(local)
}

fn fail_no_fennel() -> ! {
    panic!(
        "\n\noml needs the Fennel compiler (fennel.lua, Fennel >= {}.{}) at build time.\n\
         Install it with one of:\n  \
         scripts/setup-fennel.sh          (any Debian, bookworm included; needs no system change)\n  \
         apt-get install fennel           (Debian trixie and later, Ubuntu 24.04 and later)\n  \
         dnf install fennel / brew install fennel / nix-env -iA nixpkgs.fennel\n\
         or point OML_FENNEL_LUA at a fennel.lua file.\n",
        MIN_FENNEL.0, MIN_FENNEL.1
    )
}

fn check_version(path: &Path, src: &str) {
    let version = src
        .lines()
        .find_map(|l| l.trim().strip_prefix("local version = \""))
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("0.0");
    let mut parts = version
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if found < MIN_FENNEL {
        panic!(
            "{} is Fennel {version}; oml needs Fennel >= {}.{} (scripts/setup-fennel.sh installs one)",
            path.display(),
            MIN_FENNEL.0,
            MIN_FENNEL.1
        );
    }
}
