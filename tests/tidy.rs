//! Mechanical checks of the invariants written in ARCHITECTURE.md: they fail the build when a
//! change crosses a boundary the design depends on.

#![allow(clippy::print_stdout, clippy::print_stderr)] // test and tool output

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("readable source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(root)
                .expect("under the manifest dir")
                .display()
                .to_string();
            let text = fs::read_to_string(&p).expect("readable source");
            (rel, text)
        })
        .collect()
}

/// Code lines only: comments and doc comments are allowed to mention anything.
fn code(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_module_opens_with_a_module_doc() {
    let missing: Vec<String> = sources()
        .into_iter()
        .filter(|(_, text)| !text.trim_start().starts_with("//!"))
        .map(|(rel, _)| rel)
        .collect();
    assert!(missing.is_empty(), "modules without a //! doc: {missing:?}");
}

#[test]
fn only_main_exits_the_process() {
    let offenders: Vec<String> = sources()
        .into_iter()
        .filter(|(rel, text)| rel != "src/main.rs" && code(text).contains("process::exit"))
        .map(|(rel, _)| rel)
        .collect();
    assert!(
        offenders.is_empty(),
        "process::exit outside main.rs: {offenders:?}"
    );
}

/// A REPL form waiting in an async host function is interrupted only if the function was made
/// with `lisp::create_async_function`. Only that wrapper itself and the REPL's own input reader
/// (which runs while no form does) call mlua's constructor directly.
#[test]
fn async_host_functions_are_interruptible() {
    let allowed = [("src/lisp/run.rs", 1), ("src/lisp/repl.rs", 1)];
    for (rel, text) in sources() {
        let direct = code(&text).matches(".create_async_function(").count();
        let expected = allowed
            .iter()
            .find(|(file, _)| *file == rel)
            .map_or(0, |(_, n)| *n);
        assert_eq!(
            direct, expected,
            "{rel}: make async host functions with crate::lisp::create_async_function"
        );
    }
}

/// stdout belongs to the protocol in ACP mode. Only these modules may write to it: the front
/// ends, the CLI's terminal modes, and the host's default destination of `print` (the REPL's
/// stdout is the user's).
const STDOUT_WRITERS: &[&str] = &["src/cli/", "src/front/", "src/lisp/host.rs"];

#[test]
fn only_the_frontends_write_to_stdout() {
    let offenders: Vec<String> = sources()
        .into_iter()
        .filter(|(rel, text)| {
            let c = code(text);
            let writes = c.contains("println!(")
                || c.contains("print!(")
                || c.contains("stdout()")
                || c.contains("io::stdout");
            writes && !STDOUT_WRITERS.iter().any(|w| rel.starts_with(w))
        })
        .map(|(rel, _)| rel)
        .collect();
    assert!(
        offenders.is_empty(),
        "stdout written outside the frontends: {offenders:?}"
    );
}

/// The layers of ARCHITECTURE.md, lowest first: each entry names the top-level modules of one
/// layer. A module may use modules of lower layers; within a layer, only the pairs listed in
/// `SIDEWAYS`. `main.rs` and `lib.rs` stand above every layer.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation",
        &["cancel", "paths", "printable", "regular", "sized"],
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
];

/// The top-level module a source file belongs to (`src/llm/sse.rs` → `llm`).
fn module_of(rel: &str) -> Option<&str> {
    let rest = rel.strip_prefix("src/")?;
    let first = rest.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "main" && name != "lib").then_some(name)
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, ms)| ms.contains(&module))
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level modules a file's code names as `crate::module` or `crate::{module, ...}`.
fn crate_imports(code: &str) -> Vec<String> {
    let mut used = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
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

#[test]
fn every_module_has_a_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut unplaced = Vec::new();
    for entry in fs::read_dir(&root).expect("readable src") {
        let name = entry.expect("dir entry").file_name();
        let name = name.to_string_lossy();
        let module = name.strip_suffix(".rs").unwrap_or(&name).to_owned();
        if module != "main" && module != "lib" && layer_of(&module).is_none() {
            unplaced.push(module);
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules in no layer of tests/tidy.rs (add them to LAYERS and ARCHITECTURE.md): {unplaced:?}"
    );
}

#[test]
fn imports_only_go_down() {
    let mut offenders = Vec::new();
    for (rel, text) in sources() {
        let Some(module) = module_of(&rel) else {
            continue;
        };
        let Some(layer) = layer_of(module) else {
            continue;
        };
        let c = code(&text);
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
    assert!(
        offenders.is_empty(),
        "imports that do not go down:\n{}",
        offenders.join("\n")
    );
}

/// What the front ends share, in `src/front/` itself.
const FRONT_SHARED: &[&str] = &["lines", "signals", "stdio"];

/// The front ends are independent of one another: what two of them share lives lower down, or
/// in `FRONT_SHARED`.
#[test]
fn front_ends_do_not_use_one_another() {
    let mut offenders = Vec::new();
    for (rel, text) in sources() {
        let Some(rest) = rel.strip_prefix("src/front/") else {
            continue;
        };
        let own = ident(rest);
        let c = code(&text);
        let mut rest = c.as_str();
        while let Some(at) = rest.find("crate::front::") {
            rest = &rest[at + "crate::front::".len()..];
            let other = ident(rest);
            if other != own && !FRONT_SHARED.contains(&other.as_str()) {
                offenders.push(format!("{rel} uses crate::front::{other}"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "front ends using one another: {offenders:?}"
    );
}

/// Pure modules: decoding, folding and truncation do no I/O, so they can be fuzzed and
/// property-tested on their own.
const PURE: &[&str] = &[
    "src/llm/sse.rs",
    "src/llm/fold.rs",
    "src/llm/provider.rs",
    "src/tools/truncate.rs",
];

#[test]
fn pure_modules_do_no_io() {
    let io_markers = [
        "std::fs",
        "std::net",
        "std::process",
        "tokio::",
        "reqwest",
        "std::io::std",
    ];
    for (rel, text) in sources() {
        if PURE.contains(&rel.as_str()) {
            let c = code(&text);
            for marker in io_markers {
                assert!(
                    !c.contains(marker),
                    "{rel} is meant to be pure but uses {marker}"
                );
            }
        }
    }
    for p in PURE {
        assert!(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(p).is_file(),
            "{p} is listed as pure but does not exist; update the list"
        );
    }
}

/// Functions longer than this many lines (signature to closing brace, before a file's unit
/// tests) must be data tables listed in `LONG_TABLES`.
const MAX_FN_LINES: usize = 80;

/// Functions that are data tables, not logic: (file, function).
const LONG_TABLES: &[(&str, &str)] = &[("src/bind/llm.rs", "settings")];

/// The functions of `text` with more than `MAX_FN_LINES` lines: (name, first line, length).
/// Braces are counted per line, outside `//` comments; good enough for rustfmt'd code.
fn long_functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let after_fn = trimmed
            .split_once("fn ")
            .filter(|(before, _)| {
                before.is_empty()
                    || before.split_whitespace().all(|w| {
                        matches!(w, "pub" | "async" | "const" | "unsafe") || w.starts_with("pub(")
                    })
            })
            .map(|(_, rest)| ident(rest));
        let Some(name) = after_fn.filter(|n| !n.is_empty() && !trimmed.starts_with("//")) else {
            i += 1;
            continue;
        };
        let (mut depth, mut opened, mut j) = (0i64, false, i);
        while j < lines.len() {
            let code = lines[j].split("//").next().unwrap_or("");
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                break;
            }
            j += 1;
        }
        let len = j - i + 1;
        if opened && len > MAX_FN_LINES {
            found.push((name, i + 1, len));
        }
        i = if opened { j + 1 } else { i + 1 };
    }
    found
}

#[test]
fn functions_are_short_unless_they_are_tables() {
    let mut offenders = Vec::new();
    for (rel, text) in sources() {
        for (name, line, len) in long_functions(&text) {
            if !LONG_TABLES.contains(&(rel.as_str(), name.as_str())) {
                offenders.push(format!("{rel}:{line}: fn {name} has {len} lines"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "functions over {MAX_FN_LINES} lines (cut them into named steps, or list a data table in LONG_TABLES):\n{}",
        offenders.join("\n")
    );
    for (file, name) in LONG_TABLES {
        let text = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
            .expect("a listed file exists");
        assert!(
            long_functions(&text).iter().any(|(n, _, _)| n == name),
            "{file}: fn {name} is listed in LONG_TABLES but is no longer long; drop it from the list"
        );
    }
}

/// Lines a source file (Rust before its unit tests, or Fennel) may have: a longer file holds
/// more than one concern.
const MAX_FILE_LINES: usize = 600;

#[test]
fn files_hold_one_concern() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut fennel = Vec::new();
    fennel_files(&root.join("src"), &mut fennel);
    files.extend(fennel);
    let mut offenders = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).expect("readable source");
        let lines = text
            .lines()
            .take_while(|l| !l.starts_with("#[cfg(test)]"))
            .count();
        if lines > MAX_FILE_LINES {
            offenders.push(format!("{}: {lines} lines", path.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them along their seams): {offenders:?}"
    );
}

fn fennel_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("readable source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            fennel_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "fnl") {
            out.push(path);
        }
    }
}

/// Production code only: the text before a file's `#[cfg(test)]` module, without comments.
fn production_code(text: &str) -> String {
    code(
        &text
            .lines()
            .take_while(|l| !l.starts_with("#[cfg(test)]"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// The calls that judge an error by its text: `contains`, `starts_with`, `ends_with` or `find`
/// on a value named like an error (`e`, `err`, `error`, their `to_string()`, a `.message`), in
/// Rust, and `string.find`/`:find`/`:match` on one in Fennel.
fn error_text_tests(code: &str) -> Vec<String> {
    const NAMES: [&str; 5] = ["e", "err", "error", "e.message", "error.message"];
    const CALLS: [&str; 4] = [".contains(", ".starts_with(", ".ends_with(", ".find("];
    let mut found = Vec::new();
    for line in code.lines() {
        let hit = NAMES.iter().any(|name| {
            [name.to_string(), format!("{name}.to_string()")]
                .iter()
                .any(|receiver| {
                    CALLS.iter().any(|call| {
                        line.match_indices(&format!("{receiver}{call}"))
                            .any(|(i, _)| i == 0 || !is_ident(line.as_bytes()[i - 1]))
                    })
                })
        }) || [
            "(string.find err",
            "(string.match err",
            "(: err :find",
            "(: err :match",
        ]
        .iter()
        .any(|f| line.contains(f));
        if hit {
            found.push(line.trim().to_owned());
        }
    }
    found
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

#[test]
fn errors_are_told_apart_by_type_not_by_their_text() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    fennel_files(&root.join("src"), &mut files);
    let mut offenders = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).expect("readable source");
        let code = if path.extension().is_some_and(|e| e == "rs") {
            production_code(&text)
        } else {
            text.lines()
                .filter(|l| !l.trim_start().starts_with(';'))
                .collect::<Vec<_>>()
                .join("\n")
        };
        for line in error_text_tests(&code) {
            offenders.push(format!("{}: {line}", path.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "errors judged by their text (give the error a kind and match on it): {offenders:?}"
    );
}

#[test]
fn the_error_text_check_finds_a_planted_violation() {
    let planted = "let gone = e.to_string().ends_with(\"interrupted\");\n\
                   if err.contains(\"timed out\") {}\n\
                   (when (string.find err \"interrupted\") nil)\n\
                   let fine = line.contains(\"e.\") && self.error_count > 0;";
    assert_eq!(error_text_tests(planted).len(), 3, "{planted}");
}

/// Assertions about how long something took: a statement from `assert!`/`assert_eq!`/… to its
/// `;` that reads `.elapsed()` or a variable named `took`/`elapsed`. (A bounded wait's
/// `Instant::now() < deadline` is a guard against a hang, not a measurement.)
fn timed_assertions(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("assert") {
        let statement = &rest[i..];
        let end = statement.find(';').unwrap_or(statement.len());
        let statement = &statement[..end];
        let is_macro = statement["assert".len()..]
            .trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_')
            .starts_with('!');
        if is_macro
            && [".elapsed()", "took", "elapsed"]
                .iter()
                .any(|clock| statement.contains(clock))
        {
            found.push(
                statement
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            );
        }
        rest = &rest[i + "assert".len()..];
    }
    found
}

#[test]
fn tests_assert_what_happened_not_how_long_it_took() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("tests"), &mut files);
    rust_files(&root.join("src"), &mut files);
    let mut offenders = Vec::new();
    for path in files {
        if path.ends_with("tests/tidy.rs") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable source");
        for line in timed_assertions(&code(&text)) {
            offenders.push(format!("{}: {line}", path.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "speed is measured in the benchmarks, not asserted in tests; check what happened \
         (exited, killed, answered) instead: {offenders:?}"
    );
}

#[test]
fn the_timing_check_finds_a_planted_violation() {
    let planted = "assert!(started.elapsed() < Duration::from_secs(5));\n\
                   assert!(took < LIMIT, \"took {took:?}\");\n\
                   assert_eq!(out.code, 0);";
    assert_eq!(timed_assertions(planted).len(), 2, "{planted}");
}

/// Where a built-in Fennel file declares a setting other than with the prelude's `defsetting`
/// macro: a helper of its own, or a direct call of `oml.defsetting*` (which only `core.fnl`,
/// where it is defined, and the macro itself may call).
fn own_setting_declarations(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with(';'))
        .filter(|l| l.contains("(fn defsetting") || l.contains("oml.defsetting*"))
        .map(|l| l.trim().to_owned())
        .collect()
}

#[test]
fn fennel_declares_settings_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    fennel_files(&root.join("src"), &mut files);
    let mut offenders = Vec::new();
    for path in files {
        if path.ends_with("prelude/core.fnl") || path.ends_with("prelude/macros.fnl") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable source");
        for line in own_setting_declarations(&text) {
            offenders.push(format!("{}: {line}", path.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "declare settings with the prelude's (defsetting name default type doc): {offenders:?}"
    );
}

#[test]
fn the_setting_check_finds_a_planted_violation() {
    let planted = "(fn defsetting [name default typ doc]\n  (oml.defsetting* name default {}))\n\
                   ;; (oml.defsetting* in a comment is fine)\n(defsetting my.limit 1 :integer \"\")";
    assert_eq!(own_setting_declarations(planted).len(), 2, "{planted}");
}

/// Where Rust code declares a setting other than with `SettingDecl::new` (which records where
/// it was called): a `SettingDecl { .. }` literal, or a closure of its own filling one in.
fn own_rust_setting_declarations(code: &str) -> Vec<String> {
    code.lines()
        .filter(|l| l.contains("SettingDecl {") && !l.contains("pub struct SettingDecl"))
        .map(|l| l.trim().to_owned())
        .collect()
}

#[test]
fn rust_declares_settings_one_way() {
    let mut offenders = Vec::new();
    for (rel, text) in sources() {
        if rel == "src/lisp/settings.rs" {
            continue;
        }
        for line in own_rust_setting_declarations(&code(&text)) {
            offenders.push(format!("{rel}: {line}"));
        }
    }
    assert!(
        offenders.is_empty(),
        "declare settings with SettingDecl::new(name, type, default, doc): {offenders:?}"
    );
}

#[test]
fn the_rust_setting_check_finds_a_planted_violation() {
    let planted = "let decl = |name, line| SettingDecl {\n    name,\n    line,\n};\n\
                   SettingDecl::new(\"a.b\", \"integer\", 1, \"doc\");";
    assert_eq!(own_rust_setting_declarations(planted).len(), 1, "{planted}");
}

/// The layer (of [`LAYERS`]) whose module owns a Lisp namespace, for the namespaces oml's own
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

#[test]
fn built_in_fennel_changes_nothing_of_a_layer_above_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    fennel_files(&root.join("src"), &mut files);
    let mut offenders = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(root)
            .expect("under the root")
            .display()
            .to_string();
        let module = module_of(&rel).expect("a module").to_owned();
        let text = fs::read_to_string(&path).expect("readable source");
        for problem in upward_definitions(&module, &text) {
            offenders.push(format!("{rel}: {problem}"));
        }
    }
    assert!(
        offenders.is_empty(),
        "a layer's Fennel redefines or advises a layer above it (let the upper layer install \
         its behaviour through a hook the lower one calls by name): {offenders:?}"
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

/// The top-level `(fn …)` forms of a Fennel text longer than `max` lines: (line, length, name).
/// Strings (docstrings with brackets) and `;` comments do not count towards the nesting.
fn long_fennel_functions(text: &str, max: usize) -> Vec<(usize, usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("(fn ") {
            i += 1;
            continue;
        }
        let (mut depth, mut in_string, mut escaped) = (0i32, false, false);
        let mut end = i;
        'form: for (j, line) in lines.iter().enumerate().skip(i) {
            end = j;
            for c in line.chars() {
                match (in_string, escaped, c) {
                    (true, true, _) => escaped = false,
                    (true, false, '\\') => escaped = true,
                    (true, false, '"') => in_string = false,
                    (true, false, _) => {}
                    (false, _, ';') => break,
                    (false, _, '"') => in_string = true,
                    (false, _, '(' | '[' | '{') => depth += 1,
                    (false, _, ')' | ']' | '}') => depth -= 1,
                    _ => {}
                }
            }
            if depth <= 0 {
                break 'form;
            }
        }
        let length = end - i + 1;
        if length > max {
            let name = lines[i].split_whitespace().nth(1).unwrap_or("?").to_owned();
            found.push((i + 1, length, name));
        }
        i = end + 1;
    }
    found
}

#[test]
fn fennel_functions_are_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    fennel_files(&root.join("src"), &mut files);
    let mut offenders = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).expect("readable source");
        for (line, length, name) in long_fennel_functions(&text, MAX_FN_LINES) {
            offenders.push(format!(
                "{}:{line}: {name} is {length} lines",
                path.display()
            ));
        }
    }
    assert!(
        offenders.is_empty(),
        "Fennel functions over {MAX_FN_LINES} lines (cut them at their seams): {offenders:?}"
    );
}

#[test]
fn the_fennel_length_check_finds_a_planted_violation() {
    let body = "  (print \"(unbalanced in a string\") ; ) in a comment\n".repeat(5);
    let planted =
        format!("(fn short [] nil)\n(fn long []\n  \"doc [\"\n{body}  nil)\n(fn after [] nil)");
    assert_eq!(
        long_fennel_functions(&planted, 5),
        vec![(2, 8, "long".to_owned())],
        "{planted}"
    );
}

/// The most lines a test file holds: tests read as tables and share their helpers
/// (`tests/support/`), so a file over this is two concerns.
const MAX_TEST_FILE_LINES: usize = 1000;

#[test]
fn test_files_hold_one_concern() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("tests"), &mut files);
    let offenders: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = fs::read_to_string(path)
                .expect("readable test")
                .lines()
                .count();
            (lines > MAX_TEST_FILE_LINES).then(|| format!("{}: {lines} lines", path.display()))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "test files over {MAX_TEST_FILE_LINES} lines (split them by what they test): {offenders:?}"
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
fn rust_namespaces() -> Vec<String> {
    let mut found = Vec::new();
    for (_, text) in sources() {
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

#[test]
fn built_in_fennel_needs_only_globals_that_exist_when_it_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let order = load_order(&fs::read_to_string(root.join("build.rs")).expect("build.rs"));
    assert!(
        order.len() > 10,
        "the load order is read from build.rs: {order:?}"
    );
    let core = fs::read_to_string(root.join("src/lisp/prelude/core.fnl")).expect("core.fnl");
    let list = core
        .split_once("(local namespaces [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("core.fnl's namespace list");
    let mut defined: Vec<String> = rust_namespaces();
    defined.extend(LUA_GLOBALS.iter().map(|g| g.to_string()));
    let mut offenders = Vec::new();
    for file in &order {
        let text = fs::read_to_string(root.join(file)).expect("a built-in file");
        let (needs, adds, frozen) = load_time_globals(&text);
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
            defined.extend(
                list.split_whitespace()
                    .map(|n| n.trim_start_matches(':').to_owned()),
            );
        }
    }
    assert!(
        offenders.is_empty(),
        "built-in Fennel depends on the load order in a way nothing checks (capture only \
         namespaces made before it loads; call functions by name): {offenders:?}"
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
