//! The Lisp host: one Lua 5.4 state running Fennel, shared by every task of the process.
//!
//! `Lisp` is a cheap, cloneable handle (`Send + Sync`). It owns the embedded Fennel compiler and
//! the prelude (both precompiled to bytecode by `build.rs`), compiles user files with a per-file
//! cache keyed by content hash (`compile`), runs Lisp in coroutines so that Rust futures can be
//! awaited from Lisp (`run`), interrupts runaway forms with an instruction-count hook, declares and
//! reads settings (`settings`), and documents the functions Rust defines (`surface`). The `oml.*`
//! functions of the host itself are in `host`; errors in `error`.
//!
//! Rust reaches Lisp only *by name at call time* (`call`, `function`): it never keeps a Lisp
//! function across calls, so a redefinition or an advice takes effect on the next call.
//!
//! This module does not know about models, tools, sessions or ACP; those modules put their own
//! functions and settings into the namespace tables through this API.

mod compile;
mod convert;
mod decode;
pub mod encode;
mod error;
mod host;
pub mod init;
pub mod repl;
mod run;
mod settings;
pub mod stored;
pub mod surface;
mod watch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use crate::cancel::CancelToken;

pub use compile::compile_in;
pub(crate) use compile::{sha256_hex, write_atomically};
pub use convert::{from_lua, is_large, to_lua};
pub use error::{LispError, RuntimeError};
pub use run::{HOOK_INSTRUCTIONS, create_async_function};
pub use settings::SettingDecl;
pub use surface::{HostFn, define, document};
pub use watch::{DefaultWatch, RECHECK_EVERY};

static FENNEL_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fennel.luac"));
/// Fennel's built-in macros as bytecode, which the embedded `fennel.lua` loads from the global
/// `__oml_fennel_macros` instead of parsing their source at every start (see build.rs).
static FENNEL_MACROS: &[&[u8]] = include!(concat!(env!("OUT_DIR"), "/fennel_macros.rs"));
const FENNEL_MACROS_GLOBAL: &str = "__oml_fennel_macros";
static PRELUDE_MACROS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_macros.luac"));
static PRELUDE_HOST: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_host.luac"));
static PRELUDE_CORE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_core.luac"));

/// The prelude's Fennel source, so that `source` works on built-in functions too.
const PRELUDE_SOURCES: &[(&str, &str)] = &[
    (
        "src/lisp/prelude/macros.fnl",
        include_str!("prelude/macros.fnl"),
    ),
    (
        "src/lisp/prelude/host.fnl",
        include_str!("prelude/host.fnl"),
    ),
    (
        "src/lisp/prelude/core.fnl",
        include_str!("prelude/core.fnl"),
    ),
    (
        "src/lisp/prelude/repl.fnl",
        include_str!("prelude/repl.fnl"),
    ),
];

/// Where the compiler function of `prelude/host.fnl` is kept in the Lua registry.
const COMPILER: &str = "oml.compile";
/// Where the scope holding the prelude's macros is kept in the Lua registry.
const SCOPE: &str = "oml.scope";
/// Where the table returned by `prelude/host.fnl` is kept in the Lua registry.
const HOST_GLUE: &str = "oml.host-glue";

/// The names of Fennel's compiler environment that the prelude's macros use.
const MACRO_ENV: &[&str] = &[
    "sym",
    "list",
    "sequence",
    "sym?",
    "list?",
    "table?",
    "sequence?",
    "multi-sym?",
    "varg?",
    "comment?",
    "ast-source",
    "view",
];

/// Where `print` from Lisp goes when no sink is attached to the running coroutine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The REPL, `oml eval` and `oml run`: stdout is the user's.
    Stdout,
    /// `oml acp`: stdout belongs to the protocol, so Lisp output goes to stderr.
    Stderr,
}

/// How to build the host.
#[derive(Clone, Debug)]
pub struct LispOptions {
    pub output: Output,
    /// Where compiled Fennel is cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
}

/// A sink for what one coroutine says (a REPL conversation): its `print` lines arrive as
/// [`repl::Said::Printed`].
pub type Sink = tokio::sync::mpsc::UnboundedSender<repl::Said>;

struct Shared {
    output: Output,
    cache_dir: Option<PathBuf>,
    /// Output sinks by coroutine (the Lua thread pointer).
    sinks: Mutex<HashMap<usize, Sink>>,
    /// The interrupt of each REPL conversation, by its coroutine.
    interrupts: Mutex<HashMap<usize, repl::Interrupt>>,
    /// Embedded sources registered by other modules (see `register_source`).
    sources: Mutex<Vec<(&'static str, &'static str)>>,
}

impl Shared {
    /// The embedded source text of `name`: the prelude's or a registered one.
    fn source(&self, name: &str) -> Option<&'static str> {
        let found = PRELUDE_SOURCES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s);
        found.or_else(|| {
            let extra = self.sources.lock();
            extra.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
        })
    }
}

/// The handle to the one Lisp state of the process.
#[derive(Clone)]
pub struct Lisp {
    lua: Lua,
    shared: Arc<Shared>,
}

impl Lisp {
    /// Build the state: standard libraries (with `debug`, which Fennel needs), Fennel, the host
    /// functions and the prelude. Fast: everything is loaded from bytecode.
    pub fn new(options: LispOptions) -> Result<Lisp, LispError> {
        // SAFETY: the `debug` library is what makes this constructor unsafe in mlua's terms;
        // Fennel needs it for metadata and tracebacks, and oml's Lisp code is trusted like an
        // Emacs init file (project files run only once their directory is trusted).
        let lua =
            unsafe { Lua::unsafe_new_with(StdLib::ALL_SAFE | StdLib::DEBUG, LuaOptions::new()) };
        let shared = Arc::new(Shared {
            output: options.output,
            cache_dir: options.cache_dir,
            sinks: Mutex::new(HashMap::new()),
            interrupts: Mutex::new(HashMap::new()),
            sources: Mutex::new(Vec::new()),
        });
        lua.set_app_data(shared.clone());
        // Generational collection: a streaming turn makes a few short-lived tables per token
        // (events, their renderings), which the young generation frees cheaply; the incremental
        // collector kept re-marking the long-lived prelude instead. It cut the CPU time per
        // `session/update` by about a quarter in `benches/acp.rs`. `(collectgarbage :incremental)`
        // from an init file switches back.
        lua.gc_set_mode(mlua::state::GcMode::Generational(
            mlua::state::GcGenParams::default(),
        ));
        let lisp = Lisp { lua, shared };
        lisp.boot()?;
        Ok(lisp)
    }

    fn boot(&self) -> Result<(), LispError> {
        let lua = &self.lua;
        let chunks = lua.create_table()?;
        for chunk in FENNEL_MACROS {
            chunks.raw_push(lua.create_string(chunk)?)?;
        }
        lua.globals().raw_set(FENNEL_MACROS_GLOBAL, chunks)?;
        let fennel: Table = lua
            .load(FENNEL_BYTECODE)
            .set_name("@fennel.lua")
            .set_mode(ChunkMode::Binary)
            .call(())?;
        lua.globals().raw_set(FENNEL_MACROS_GLOBAL, Value::Nil)?;
        let loaded: Table = lua.globals().get::<Table>("package")?.get("loaded")?;
        loaded.set("fennel", &fennel)?;
        lua.globals().set("fennel", &fennel)?;

        host::install(lua, self.shared.output)?;
        self.install_macros(&fennel)?;
        let glue: Table = self.load_prelude(PRELUDE_HOST, "src/lisp/prelude/host.fnl")?;
        lua.set_named_registry_value(COMPILER, glue.get::<Function>("compile")?)?;
        if self.shared.output == Output::Stderr {
            glue.get::<Function>("keep-children-off-stdout")?
                .call::<()>(())?;
        }
        lua.set_named_registry_value(HOST_GLUE, glue)?;
        self.load_prelude::<()>(PRELUDE_CORE, "src/lisp/prelude/core.fnl")?;
        init::declare_settings(self)?;
        Ok(())
    }

    /// Run the prelude chunk `bytecode`, compiled by build.rs from `file`.
    fn load_prelude<R: mlua::FromLuaMulti>(
        &self,
        bytecode: &[u8],
        file: &str,
    ) -> Result<R, LispError> {
        Ok(self
            .lua
            .load(bytecode)
            .set_name(format!("@{file}"))
            .set_mode(ChunkMode::Binary)
            .call(())?)
    }

    /// The prelude's macros, compiled at build time, into the scope every file is compiled in.
    /// They run in the compiler's environment, which gives them `sym`, `list` and friends.
    fn install_macros(&self, fennel: &Table) -> Result<(), LispError> {
        let lua = &self.lua;
        let env = lua.create_table()?;
        let mangle: Function = fennel.get("mangle")?;
        for name in MACRO_ENV {
            let v = fennel.get::<Value>(*name)?;
            let mangled: String = mangle.call(*name)?;
            env.set(mangled, v.clone())?;
            env.set(*name, v)?;
        }
        let meta = lua.create_table()?;
        meta.set("__index", lua.globals())?;
        env.set_metatable(Some(meta))?;
        let macros: Table = lua
            .load(PRELUDE_MACROS)
            .set_name("@src/lisp/prelude/macros.fnl")
            .set_mode(ChunkMode::Binary)
            .set_environment(env)
            .call(())?;
        let make_scope: Function = fennel.get("scope")?;
        let scope: Table = make_scope.call(())?;
        let scope_macros: Table = scope.get("macros")?;
        for pair in macros.pairs::<Value, Value>() {
            let (k, v) = pair?;
            scope_macros.set(k, v)?;
        }
        lua.set_named_registry_value(SCOPE, scope)?;
        Ok(())
    }

    /// A function of `prelude/host.fnl`.
    fn host_glue(&self, name: &str) -> Result<Function, LispError> {
        let glue: Table = self.lua.named_registry_value(HOST_GLUE)?;
        Ok(glue.get(name)?)
    }

    /// The handle of the host that owns `lua`, for host functions that need the whole host (a
    /// function gets the state; keeping a `Lisp` inside it would keep the state alive forever).
    pub fn from_lua(lua: &Lua) -> Option<Lisp> {
        let shared = lua.app_data_ref::<Arc<Shared>>()?.clone();
        Some(Lisp {
            lua: lua.clone(),
            shared,
        })
    }

    /// The underlying Lua state, for modules that register their own host functions.
    pub fn lua(&self) -> &Lua {
        &self.lua
    }

    /// Route `print` from the coroutine `thread` to `sink` until `detach_sink` is called.
    pub fn attach_sink(&self, thread: &mlua::Thread, sink: Sink) {
        (self.shared.sinks.lock()).insert(thread.to_pointer() as usize, sink);
    }

    pub fn detach_sink(&self, thread: &mlua::Thread) {
        (self.shared.sinks.lock()).remove(&(thread.to_pointer() as usize));
    }

    /// Let `interrupt` end the waits of async host functions called from the coroutine
    /// `thread` (a REPL conversation), until `detach_interrupt`.
    pub fn attach_interrupt(&self, thread: &mlua::Thread, interrupt: repl::Interrupt) {
        (self.shared.interrupts.lock()).insert(thread.to_pointer() as usize, interrupt);
    }

    pub fn detach_interrupt(&self, thread: &mlua::Thread) {
        (self.shared.interrupts.lock()).remove(&(thread.to_pointer() as usize));
    }

    fn interrupt_of(&self, thread: &mlua::Thread) -> Option<repl::Interrupt> {
        let interrupts = self.shared.interrupts.lock();
        interrupts.get(&(thread.to_pointer() as usize)).cloned()
    }

    /// Evaluate Fennel source; returns the values of its last form.
    pub async fn eval(&self, src: &str, name: &str) -> Result<MultiValue, LispError> {
        let f = self.compile(src, name)?;
        self.run(f, (), &CancelToken::new()).await
    }

    /// Evaluate Fennel source and render its values with `fennel.view` (what `oml eval` prints).
    pub async fn eval_to_string(
        &self,
        src: &str,
        name: &str,
        cancel: &CancelToken,
    ) -> Result<String, LispError> {
        let f = self.compile(src, name)?;
        let values = self.run(f, (), cancel).await?;
        self.view_values(values)
    }

    /// `fennel.view` of each value, separated by tabs.
    pub fn view_values(&self, values: MultiValue) -> Result<String, LispError> {
        let fennel: Table = self.lua.globals().get("fennel")?;
        let view: Function = fennel.get("view")?;
        let mut out = Vec::new();
        for v in values {
            out.push(view.call::<String>(v)?);
        }
        Ok(out.join("\t"))
    }

    /// Load and run a Fennel file.
    pub async fn load_file(&self, path: &Path, cancel: &CancelToken) -> Result<(), LispError> {
        let f = self.compile_file(path)?;
        self.run::<()>(f, (), cancel).await
    }

    /// Make `source` work on functions compiled from an embedded file `name` (a path relative to
    /// the crate root, as given to the compiler).
    pub fn register_source(&self, name: &'static str, text: &'static str) {
        self.shared.sources.lock().push((name, text));
    }

    /// The function `ns.name` as it is *now* (late binding), or `None`.
    pub fn function(&self, qualified: &str) -> Result<Option<Function>, LispError> {
        match self.lookup(qualified)? {
            Value::Function(f) => Ok(Some(f)),
            Value::Table(t)
                if t.metatable()
                    .is_some_and(|m| m.contains_key("__call").unwrap_or(false)) =>
            {
                let call: Function = t.metatable().expect("checked").get("__call")?;
                Ok(Some(call.bind(t)?))
            }
            _ => Ok(None),
        }
    }

    /// The value named by a dotted path from the globals (`agent.max-turns`), or nil.
    pub fn lookup(&self, qualified: &str) -> Result<Value, LispError> {
        let mut current = Value::Table(self.lua.globals());
        for part in qualified.split('.') {
            current = match current {
                Value::Table(t) => t.raw_get(part)?,
                _ => return Ok(Value::Nil),
            };
        }
        Ok(current)
    }

    /// Call the function named `qualified` with JSON arguments and convert its first result
    /// back to JSON. The name is resolved at call time.
    pub async fn call_json(
        &self,
        qualified: &str,
        args: &[serde_json::Value],
        cancel: &CancelToken,
    ) -> Result<serde_json::Value, LispError> {
        let f = self
            .function(qualified)?
            .ok_or_else(|| LispError::Runtime(format!("{qualified} is not a function")))?;
        let mut lua_args = MultiValue::new();
        for a in args {
            lua_args.push_back(to_lua(&self.lua, a)?);
        }
        let v: Value = self.run(f, lua_args, cancel).await?;
        Ok(from_lua(&self.lua, v)?)
    }

    /// Put `dir` on the module search path (`require`) and the macro search path, once; its
    /// modules must stay in `dir` itself (see [`Lisp::add_load_path_within`]).
    pub fn add_load_path(&self, dir: &Path) -> Result<(), LispError> {
        self.add_load_path_within(dir, dir)
    }

    /// Put `dir` on the search paths, once; a module found there is loaded only when its real
    /// path lies inside `within` (a link out of it is refused by the searcher).
    pub fn add_load_path_within(&self, dir: &Path, within: &Path) -> Result<(), LispError> {
        self.host_glue("add-load-path")?
            .call::<()>((dir.display().to_string(), within.display().to_string()))?;
        Ok(())
    }

    /// Install the module searcher that compiles `.fnl` modules through the cache, and refuses
    /// a module whose real path leaves the folder its load-path entry must stay in.
    pub fn install_searcher(&self) -> Result<(), LispError> {
        let me = self.clone();
        let find = self
            .lua
            .create_function(move |lua, (path, within): (String, String)| {
                if let Some(real) = crate::project::escapes(Path::new(&path), Path::new(&within)) {
                    let why = format!(
                        "not loading {path}: it is a link to {}, outside {within}",
                        real.display()
                    );
                    return Ok((Value::Nil, Value::String(lua.create_string(why)?)));
                }
                match me.compile_file(Path::new(&path)) {
                    Ok(f) => Ok((Value::Function(f), Value::Nil)),
                    Err(e) => Ok((Value::Nil, Value::String(lua.create_string(e.to_string())?))),
                }
            })?;
        self.host_glue("install-searcher")?.call::<()>(find)?;
        Ok(())
    }
}
