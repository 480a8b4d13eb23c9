//! Mechanical checks of the invariants written in ARCHITECTURE.md: they fail the build when a
//! change crosses a boundary the design depends on.

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
    let allowed = [("src/lisp/mod.rs", 1), ("src/lisp/repl.rs", 1)];
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

/// stdout belongs to the protocol in ACP mode. Only these modules may write to it: the CLI's
/// terminal modes, print mode, the ACP agent's writer, and the REPL (whose stdout is the user's).
const STDOUT_WRITERS: &[&str] = &[
    "src/cli/",
    "src/print_mode.rs",
    "src/acp/agent/",
    "src/lisp/mod.rs",
    "src/lisp/repl.rs",
    "src/lisp/server.rs",
];

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

#[test]
fn the_agent_knows_nothing_of_acp_or_the_cli() {
    let offenders: Vec<String> = sources()
        .into_iter()
        .filter(|(rel, text)| {
            let c = code(text);
            rel.starts_with("src/agent/")
                && (c.contains("crate::acp")
                    || c.contains("crate::cli")
                    || c.contains("print_mode"))
        })
        .map(|(rel, _)| rel)
        .collect();
    assert!(
        offenders.is_empty(),
        "agent/ reaches into a frontend: {offenders:?}"
    );
}

/// Pure modules: decoding, folding and truncation do no I/O, so they can be fuzzed and
/// property-tested on their own.
const PURE: &[&str] = &["src/llm/sse.rs", "src/llm/fold.rs", "src/tools/truncate.rs"];

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
