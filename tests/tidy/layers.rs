//! The layers of ARCHITECTURE.md, for Rust: every top-level module is in one layer, imports only
//! go down (or sideways along a listed pair), the front ends do not use one another, and in
//! the Lisp surface the sandbox knows no session and the session no tools. The
//! same table decides which layer's Fennel may change which namespace (`fennel.rs`).

use crate::tree::{self, File, assert_none, code, ident, planted};

/// The layers of ARCHITECTURE.md, lowest first: each entry names the top-level modules of one
/// layer. A module may use modules of lower layers; within a layer, only the pairs listed in
/// `SIDEWAYS`. `main.rs` and `lib.rs` stand above every layer.
pub const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation",
        &["acp", "cancel", "paths", "printable", "regular", "sized"],
    ),
    (
        "subsystems",
        &[
            "llm",
            "tools",
            "catalog",
            "jsonrpc",
            "acp_client",
            "mcp",
            "session",
            "project",
            "sandbox",
            "ask",
            "hooks",
        ],
    ),
    ("the Lisp host", &["lisp"]),
    ("the Lisp surface", &["bind"]),
    ("the agent loop", &["agent"]),
    ("the front ends", &["front"]),
    ("the command line", &["cli"]),
];

/// Imports allowed within one layer: (user, used).
const SIDEWAYS: &[(&str, &str)] = &[
    ("acp_client", "jsonrpc"),
    ("tools", "sandbox"),
    ("project", "sandbox"),
    ("mcp", "acp_client"),
    ("ask", "acp_client"),
    ("ask", "sandbox"),
    ("hooks", "sandbox"),
];

/// The top-level module a source file belongs to (`src/llm/sse.rs` → `llm`).
pub fn module_of(rel: &str) -> Option<&str> {
    let rest = rel.strip_prefix("src/")?;
    let first = rest.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "main" && name != "lib").then_some(name)
}

/// The position in [`LAYERS`] of a top-level module's layer.
pub fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, ms)| ms.contains(&module))
}

/// The top-level modules a file's code names as `crate::module` or `crate::{module, ...}`.
fn crate_imports(code: &str) -> Vec<String> {
    names_after(code, "crate::")
}

/// The names that follow `prefix` in `code` (`prefix` `name` or `prefix` `{name, ...}`), sorted,
/// once each.
fn names_after(code: &str, prefix: &str) -> Vec<String> {
    let mut used = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        rest = &rest[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            used.extend(group[..end].split(',').map(|item| ident(item.trim())));
        } else {
            used.push(ident(rest));
        }
    }
    used.retain(|n| !n.is_empty());
    used.sort();
    used.dedup();
    used
}

/// The entries of `src/` (`llm`, `cancel.rs`) that are modules of no layer.
fn unplaced(entries: &[String]) -> Vec<String> {
    entries
        .iter()
        .map(|name| name.strip_suffix(".rs").unwrap_or(name).to_owned())
        .filter(|module| module != "main" && module != "lib" && layer_of(module).is_none())
        .collect()
}

#[test]
fn every_module_has_a_layer() {
    assert_none(
        &unplaced(&tree::top_level_of_src()),
        "modules in no layer of tests/tidy/layers.rs (add them to LAYERS and ARCHITECTURE.md)",
    );
}

#[test]
fn the_layer_check_finds_a_planted_violation() {
    let entries = [
        "llm",
        "cancel.rs",
        "main.rs",
        "lib.rs",
        "plugins",
        "queue.rs",
    ]
    .map(String::from);
    assert_eq!(unplaced(&entries), ["plugins", "queue"]);
}

/// The imports of Rust sources that do not go down the layers, and the `super::super` paths
/// that would hide one.
fn upward_imports(files: &[File]) -> Vec<String> {
    let mut offenders = Vec::new();
    for (rel, text) in files {
        let Some(module) = module_of(rel) else {
            continue;
        };
        let Some(layer) = layer_of(module) else {
            continue;
        };
        let c = code(text);
        if c.contains("super::super") {
            offenders.push(format!("{rel}: name crate:: paths, not super::super"));
        }
        for used in crate_imports(&c) {
            if used == module {
                continue;
            }
            let Some(used_layer) = layer_of(&used) else {
                offenders.push(format!("{rel} uses crate::{used}, which has no layer"));
                continue;
            };
            let sideways = SIDEWAYS.contains(&(module, used.as_str()));
            if used_layer > layer || (used_layer == layer && !sideways) {
                offenders.push(format!(
                    "{rel} ({}) uses crate::{used} ({})",
                    LAYERS[layer].0, LAYERS[used_layer].0
                ));
            }
        }
    }
    offenders
}

#[test]
fn imports_only_go_down() {
    assert_none(
        &upward_imports(&tree::rust_sources()),
        "imports that do not go down",
    );
}

#[test]
fn the_import_check_finds_a_planted_violation() {
    let files = planted(&[
        (
            "src/main.rs",
            "use oml::cli;\nfn main() { crate::cli::main(); }",
        ),
        (
            "src/llm/up.rs",
            "use crate::agent::Agent;\nuse crate::llm::sse;",
        ),
        (
            "src/tools/grouped.rs",
            "use crate::{cancel::CancelToken, bind::tools};\nuse crate::sandbox::launch;",
        ),
        ("src/llm/sideways.rs", "use crate::session::Store;"),
        ("src/agent/deep.rs", "use super::super::front;"),
        ("src/front/unknown.rs", "fn f() { crate::nowhere::g() }"),
        (
            "src/cli/fine.rs",
            "// crate::anything in a comment\nuse crate::front::acp;",
        ),
    ]);
    assert_eq!(
        upward_imports(&files),
        [
            "src/llm/up.rs (subsystems) uses crate::agent (the agent loop)",
            "src/tools/grouped.rs (subsystems) uses crate::bind (the Lisp surface)",
            "src/llm/sideways.rs (subsystems) uses crate::session (subsystems)",
            "src/agent/deep.rs: name crate:: paths, not super::super",
            "src/front/unknown.rs uses crate::nowhere, which has no layer",
        ]
    );
}

/// What the front ends share, in `src/front/` itself.
const FRONT_SHARED: &[&str] = &["lines", "signals", "stdio"];

/// Where one front end uses another: what two of them share lives lower down, or in
/// `FRONT_SHARED`.
fn front_ends_crossing(files: &[File]) -> Vec<String> {
    let mut offenders = Vec::new();
    for (rel, text) in files {
        let Some(rest) = rel.strip_prefix("src/front/") else {
            continue;
        };
        let own = ident(rest);
        let c = code(text);
        let mut rest = c.as_str();
        while let Some(at) = rest.find("crate::front::") {
            rest = &rest[at + "crate::front::".len()..];
            let other = ident(rest);
            if other != own && !FRONT_SHARED.contains(&other.as_str()) {
                offenders.push(format!("{rel} uses crate::front::{other}"));
            }
        }
    }
    offenders
}

#[test]
fn front_ends_do_not_use_one_another() {
    assert_none(
        &front_ends_crossing(&tree::rust_sources()),
        "front ends using one another",
    );
}

#[test]
fn the_front_end_check_finds_a_planted_violation() {
    let files = planted(&[
        (
            "src/front/chat/mod.rs",
            "use crate::front::chat::card;\nuse crate::front::stdio::out;\n\
             use crate::front::acp::Hub;",
        ),
        ("src/front/print.rs", "use crate::front::repl::Repl;"),
        (
            "src/cli/modes.rs",
            "use crate::front::chat;\nuse crate::front::acp;",
        ),
    ]);
    assert_eq!(
        front_ends_crossing(&files),
        [
            "src/front/chat/mod.rs uses crate::front::acp",
            "src/front/print.rs uses crate::front::repl",
        ]
    );
}

/// Pairs of `src/bind/` modules where the first never uses the second: the sandbox's policy
/// takes what it needs of a session as a value (`bind::sandbox::Scope`) built by the tools'
/// face, which stands above the session primitives; so `sandbox` knows neither, and `session`
/// does not know the tools.
const BIND_NEVER_USES: &[(&str, &str)] = &[
    ("sandbox", "session"),
    ("sandbox", "tools"),
    ("session", "tools"),
];

/// The module of `src/bind/` a file belongs to (`src/bind/sandbox/status.rs` → `sandbox`), and
/// whether the file is that module's root (`bind/sandbox.rs`, `bind/sandbox/mod.rs`), where
/// `super` is `bind`.
fn bind_module_of(rel: &str) -> Option<(&str, bool)> {
    let rest = rel.strip_prefix("src/bind/")?;
    match rest.split_once('/') {
        Some((module, file)) => Some((module, file == "mod.rs")),
        None => Some((rest.strip_suffix(".rs")?, true)).filter(|(m, _)| *m != "mod"),
    }
}

/// The uses of one `src/bind/` module by another that [`BIND_NEVER_USES`] forbids, named as
/// `crate::bind::module` anywhere or as `super::module` in a module's root file.
fn bind_crossings(files: &[File]) -> Vec<String> {
    let mut offenders = Vec::new();
    for (rel, text) in files {
        let Some((module, root)) = bind_module_of(rel) else {
            continue;
        };
        let c = code(text);
        let mut used = names_after(&c, "crate::bind::");
        if root {
            used.extend(names_after(&c, "super::"));
        }
        used.sort();
        used.dedup();
        for other in used {
            if BIND_NEVER_USES.contains(&(module, other.as_str())) {
                offenders.push(format!("{rel}: bind::{module} uses bind::{other}"));
            }
        }
    }
    offenders
}

#[test]
fn the_sandbox_knows_no_session_and_the_session_no_tools() {
    assert_none(
        &bind_crossings(&tree::rust_sources()),
        "bind modules using what they must not (see BIND_NEVER_USES)",
    );
}

#[test]
fn the_bind_check_finds_a_planted_violation() {
    let files = planted(&[
        (
            "src/bind/sandbox/mod.rs",
            "let more = super::session::additional_directories(lua);",
        ),
        (
            "src/bind/sandbox/status.rs",
            "use crate::bind::{llm, tools::cwd};\nuse super::scope;",
        ),
        ("src/bind/sandbox/deep/mod.rs", "use super::session;"),
        (
            "src/bind/session.rs",
            "// crate::bind::tools in a comment\nuse super::sandbox::secrets;",
        ),
        (
            "src/bind/session/rewind.rs",
            "fn f() { crate::bind::tools::install(lisp) }",
        ),
        (
            "src/bind/tools/mod.rs",
            "use crate::bind::session::cwd;\nuse super::sandbox::Scope;",
        ),
        ("src/bind/mod.rs", "pub mod session;\nuse super::tools;"),
    ]);
    assert_eq!(
        bind_crossings(&files),
        [
            "src/bind/sandbox/mod.rs: bind::sandbox uses bind::session",
            "src/bind/sandbox/status.rs: bind::sandbox uses bind::tools",
            "src/bind/session/rewind.rs: bind::session uses bind::tools",
        ]
    );
}
