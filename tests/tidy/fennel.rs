//! The built-in Fennel keeps the layers and the load order: a layer's Fennel never changes a
//! function of a layer above it, and a file captures at load only namespaces that exist by then,
//! never a function.

use crate::layers::{layer_of, module_of};
use crate::tree::{self, File, assert_none, planted, root};

/// The layer (of `layers::LAYERS`) whose module owns a Lisp namespace, for the namespaces oml's own
/// Fennel defines things in.
const NAMESPACE_OWNERS: &[(&str, &str)] = &[
    ("oml", "lisp"),
    ("json", "lisp"),
    ("repl", "lisp"),
    ("init", "lisp"),
    ("llm", "bind"),
    ("client", "bind"),
    ("catalog", "bind"),
    ("session", "bind"),
    ("mcp", "bind"),
    ("project", "bind"),
    ("sandbox", "bind"),
    ("agent", "agent"),
    ("tools", "agent"),
    ("commands", "agent"),
    ("acp", "front"),
    ("chat", "front"),
];

/// The namespaces a Fennel text defines, redefines or advises a name in: `(fn ns.name`,
/// `(set ns.name`, `(tset ns`, `(advise! ns.name`, `(oml.advise* "ns.name"`.
fn fennel_definitions(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with(';')) {
        for form in ["(fn ", "(set ", "(tset ", "(advise! ", "(oml.advise* \""] {
            for (at, _) in line.match_indices(form) {
                let name: String = line[at + form.len()..]
                    .chars()
                    .take_while(|c| !c.is_whitespace() && !matches!(c, ')' | '"' | '['))
                    .collect();
                if let Some((ns, _)) = name.split_once('.') {
                    found.push((
                        ns.trim_start_matches('_').to_owned(),
                        line.trim().to_owned(),
                    ));
                }
            }
        }
    }
    found
}

/// Where a built-in Fennel file of one layer changes a function of a layer above it.
fn upward_definitions(file_module: &str, text: &str) -> Vec<String> {
    let Some(file_layer) = layer_of(file_module) else {
        return vec![format!("{file_module} has no layer")];
    };
    fennel_definitions(text)
        .into_iter()
        .filter_map(|(ns, line)| {
            let (_, owner) = NAMESPACE_OWNERS.iter().find(|(n, _)| *n == ns)?;
            let owner_layer = layer_of(owner)?;
            (owner_layer > file_layer).then(|| format!("{ns}.* (layer of {owner}): {line}"))
        })
        .collect()
}

/// The Fennel files' changes to functions of layers above their own.
fn upward_fennel(files: &[File]) -> Vec<String> {
    let mut offenders = Vec::new();
    for (rel, text) in files {
        let module = module_of(rel).expect("a module");
        for problem in upward_definitions(module, text) {
            offenders.push(format!("{rel}: {problem}"));
        }
    }
    offenders
}

#[test]
fn built_in_fennel_changes_nothing_of_a_layer_above_it() {
    assert_none(
        &upward_fennel(&tree::fennel_sources()),
        "a layer's Fennel redefines or advises a layer above it (let the upper layer install \
         its behaviour through a hook the lower one calls by name)",
    );
}

#[test]
fn the_fennel_layer_check_finds_a_planted_violation() {
    let planted = "(fn agent.ask-permission [call] true)\n\
                   (advise! tools.bash :mine (fn [f ...] (f ...)))\n\
                   (fn llm.helper [] nil)\n;; (fn agent.in-a-comment [] nil)";
    assert_eq!(upward_definitions("bind", planted).len(), 2, "{planted}");
    assert_eq!(upward_definitions("front", planted).len(), 0, "{planted}");
}

#[test]
fn the_fennel_layer_check_reads_each_file_in_its_own_layer() {
    let advice = "(advise! agent.run :log (fn [f ...] (f ...)))";
    let files = planted(&[
        ("src/front/chat/chat.fnl", advice),
        ("src/bind/flow.fnl", advice),
        ("src/plugins/plugins.fnl", "nil"),
    ]);
    assert_eq!(
        upward_fennel(&files),
        [
            format!("src/bind/flow.fnl: agent.* (layer of agent): {advice}"),
            "src/plugins/plugins.fnl: plugins has no layer".to_owned(),
        ]
    );
}

/// Lua's own globals, which built-in Fennel may capture at load.
const LUA_GLOBALS: &[&str] = &[
    "print",
    "string",
    "table",
    "math",
    "io",
    "os",
    "coroutine",
    "utf8",
    "debug",
    "package",
    "require",
    "pairs",
    "ipairs",
    "type",
    "tostring",
    "tonumber",
    "error",
    "pcall",
    "xpcall",
    "select",
    "next",
    "rawget",
    "rawset",
    "setmetatable",
    "getmetatable",
    "load",
];

/// The built-in Fennel files in the order they load (build.rs's `PRELUDE`).
fn load_order(build_rs: &str) -> Vec<String> {
    build_rs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("(\""))
        .filter_map(|l| l.split("\", \"").nth(1))
        .filter_map(|p| p.strip_suffix("\"),"))
        .map(str::to_owned)
        .collect()
}

/// The namespaces Rust creates before Fennel loads (`define(lua, "ns", …)`,
/// `namespace(lua, "ns")`).
fn rust_namespaces(files: &[File]) -> Vec<String> {
    let mut found = Vec::new();
    for (_, text) in files {
        for call in ["define(", "namespace("] {
            for (at, _) in text.match_indices(call) {
                let rest = &text[at + call.len()..];
                let Some(quoted) = rest.split_once(", \"").map(|(_, q)| q) else {
                    continue;
                };
                let Some((name, _)) = quoted.split_once('"') else {
                    continue;
                };
                // The name is the call's second argument: no statement ends before it.
                if !rest[..rest.find('"').unwrap_or(0)].contains([';', '\n']) {
                    found.push(name.to_owned());
                }
            }
        }
    }
    found
}

/// What a Fennel text needs from the globals when it loads, and what it adds: the names of its
/// top-level `(local x _G.name)` captures, and of its `(set _G.name …)` / `(rawset _G ns …)`
/// definitions. Also every top-level `(local x ns.name)`, which freezes a function that must be
/// called by name at call time.
fn load_time_globals(text: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (mut needs, mut adds, mut frozen) = (Vec::new(), Vec::new(), Vec::new());
    let namespaces: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("(local "))
        .filter_map(|l| l.split_once(" _G."))
        .map(|(local, _)| local.to_owned())
        .collect();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("(local ")
            && let Some((local, value)) = rest.split_once(' ')
        {
            let value = value.trim_end_matches(')');
            if let Some(global) = value.strip_prefix("_G.") {
                needs.push(global.to_owned());
            } else if let Some((ns, _)) = value.split_once('.')
                && namespaces.iter().any(|n| n == ns)
                && !value.contains([' ', '('])
            {
                frozen.push(format!("(local {local} {value})"));
            }
        }
        if let Some(rest) = line.trim_start().strip_prefix("(set _G.") {
            adds.extend(rest.split([' ', ')']).next().map(str::to_owned));
        }
    }
    (needs, adds, frozen)
}

/// The namespaces `core.fnl` makes when it loads: its `(local namespaces [...])` list.
fn core_namespaces(core: &str) -> Vec<String> {
    core.split_once("(local namespaces [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("core.fnl's namespace list")
        .split_whitespace()
        .map(|n| n.trim_start_matches(':').to_owned())
        .collect()
}

/// Where built-in Fennel, loaded in `build_rs`'s order, captures a global that does not exist
/// yet or freezes a function: `fennel` holds the files, `rust` the sources that make namespaces.
fn globals_out_of_order(build_rs: &str, fennel: &[File], rust: &[File]) -> Vec<String> {
    let mut defined: Vec<String> = rust_namespaces(rust);
    defined.extend(LUA_GLOBALS.iter().map(|g| g.to_string()));
    let mut offenders = Vec::new();
    for file in load_order(build_rs) {
        let Some((_, text)) = fennel.iter().find(|(rel, _)| *rel == file) else {
            offenders.push(format!(
                "{file}: in build.rs's order but not a built-in file"
            ));
            continue;
        };
        let (needs, adds, frozen) = load_time_globals(text);
        for need in needs.iter().filter(|n| !defined.contains(n)) {
            offenders.push(format!(
                "{file}: _G.{need} does not exist yet when it loads"
            ));
        }
        offenders.extend(
            frozen
                .iter()
                .map(|f| format!("{file}: {f} is captured at load")),
        );
        defined.extend(adds);
        if file.ends_with("prelude/core.fnl") {
            defined.extend(core_namespaces(text));
        }
    }
    offenders
}

#[test]
fn built_in_fennel_needs_only_globals_that_exist_when_it_loads() {
    let build_rs = std::fs::read_to_string(root().join("build.rs")).expect("build.rs");
    let order = load_order(&build_rs);
    assert!(
        order.len() > 10,
        "the load order is read from build.rs: {order:?}"
    );
    assert_none(
        &globals_out_of_order(&build_rs, &tree::fennel_sources(), &tree::rust_sources()),
        "built-in Fennel depends on the load order in a way nothing checks (capture only \
         namespaces made before it loads; call functions by name)",
    );
}

#[test]
fn the_load_order_check_finds_a_planted_violation() {
    let planted = "(local agent _G.agent)\n(local run agent.run)\n(local ok (agent.x 1))\n\
                   (set _G.mine {})\n  (local inner agent.run)";
    let (needs, adds, frozen) = load_time_globals(planted);
    assert_eq!(needs, ["agent"]);
    assert_eq!(adds, ["mine"]);
    assert_eq!(frozen, ["(local run agent.run)"]);
}

#[test]
fn the_load_order_check_follows_build_rs_order() {
    let build_rs = "const PRELUDE: &[(&str, &str)] = &[\n    (\"early\", \"src/early.fnl\"),\n    \
                    (\"core\", \"src/lisp/prelude/core.fnl\"),\n    (\"a\", \"src/a.fnl\"),\n    \
                    (\"b\", \"src/b.fnl\"),\n    (\"gone\", \"src/gone.fnl\"),\n];";
    let fennel = planted(&[
        (
            "src/early.fnl",
            "(local tools _G.tools)\n(local string _G.string)",
        ),
        (
            "src/lisp/prelude/core.fnl",
            "(local namespaces [:agent :tools])",
        ),
        (
            "src/a.fnl",
            "(local llm _G.llm)\n(local flow _G.flow)\n(local agent _G.agent)",
        ),
        (
            "src/b.fnl",
            "(set _G.flow {})\n(local agent _G.agent)\n(local run agent.run)",
        ),
    ]);
    let rust = planted(&[("src/bind/llm.rs", "lisp::define(lua, \"llm\", table)?;")]);
    assert_eq!(
        globals_out_of_order(build_rs, &fennel, &rust),
        [
            "src/early.fnl: _G.tools does not exist yet when it loads",
            "src/a.fnl: _G.flow does not exist yet when it loads",
            "src/b.fnl: (local run agent.run) is captured at load",
            "src/gone.fnl: in build.rs's order but not a built-in file",
        ]
    );
}
