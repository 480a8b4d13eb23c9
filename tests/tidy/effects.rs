//! What a module may do and say about itself: every module opens with a `//!` doc, only
//! `main.rs` exits the process, only the front ends write to stdout, async host functions are
//! interruptible, and the pure modules do no I/O.

use crate::tree::{self, File, assert_none, code, planted};

/// The Rust sources that do not open with a `//!` doc.
fn undocumented(files: &[File]) -> Vec<String> {
    files
        .iter()
        .filter(|(_, text)| !text.trim_start().starts_with("//!"))
        .map(|(rel, _)| rel.clone())
        .collect()
}

#[test]
fn every_module_opens_with_a_module_doc() {
    assert_none(
        &undocumented(&tree::rust_sources()),
        "modules without a //! doc",
    );
}

#[test]
fn the_module_doc_check_finds_a_planted_violation() {
    let files = planted(&[
        ("src/doc.rs", "\n//! What it is for.\nuse std::fs;"),
        (
            "src/plain.rs",
            "// A comment, not a module doc.\nuse std::fs;",
        ),
        ("src/item.rs", "/// An item's doc.\npub fn f() {}"),
    ]);
    assert_eq!(undocumented(&files), ["src/plain.rs", "src/item.rs"]);
}

/// The sources other than `main.rs` that call `process::exit`.
fn exits(files: &[File]) -> Vec<String> {
    files
        .iter()
        .filter(|(rel, text)| rel != "src/main.rs" && code(text).contains("process::exit"))
        .map(|(rel, _)| rel.clone())
        .collect()
}

#[test]
fn only_main_exits_the_process() {
    assert_none(
        &exits(&tree::rust_sources()),
        "process::exit outside main.rs",
    );
}

#[test]
fn the_exit_check_finds_a_planted_violation() {
    let files = planted(&[
        ("src/main.rs", "std::process::exit(code)"),
        (
            "src/cli/mod.rs",
            "// never std::process::exit here\nreturn status;",
        ),
        (
            "src/cli/modes.rs",
            "if bad {\n    std::process::exit(2);\n}",
        ),
    ]);
    assert_eq!(exits(&files), ["src/cli/modes.rs"]);
}

/// The files that may call mlua's async constructor directly, and how often: the wrapper
/// `lisp::create_async_function` itself and the REPL's own input reader (which runs while no
/// form does).
const DIRECT_ASYNC: &[(&str, usize)] = &[("src/lisp/run.rs", 1), ("src/lisp/repl.rs", 1)];

/// Where a source makes async host functions other than with `lisp::create_async_function`:
/// one whose direct calls of mlua's constructor differ in number from what `DIRECT_ASYNC` says.
fn uninterruptible(files: &[File], allowed: &[(&str, usize)]) -> Vec<String> {
    files
        .iter()
        .filter_map(|(rel, text)| {
            let direct = code(text).matches(".create_async_function(").count();
            let expected = allowed
                .iter()
                .find(|(file, _)| file == rel)
                .map_or(0, |(_, n)| *n);
            (direct != expected).then(|| format!("{rel}: {direct} direct calls, not {expected}"))
        })
        .collect()
}

/// A REPL form waiting in an async host function is interrupted only if the function was made
/// with `lisp::create_async_function`.
#[test]
fn async_host_functions_are_interruptible() {
    assert_none(
        &uninterruptible(&tree::rust_sources(), DIRECT_ASYNC),
        "make async host functions with crate::lisp::create_async_function",
    );
}

#[test]
fn the_async_check_finds_a_planted_violation() {
    let files = planted(&[
        ("src/lisp/run.rs", "lua.create_async_function(f)"),
        (
            "src/lisp/repl.rs",
            "// lua.create_async_function(f) in a comment",
        ),
        (
            "src/bind/llm.rs",
            "crate::lisp::create_async_function(lua, f);\nlua.create_async_function(g)",
        ),
    ]);
    assert_eq!(
        uninterruptible(&files, DIRECT_ASYNC),
        [
            "src/lisp/repl.rs: 0 direct calls, not 1",
            "src/bind/llm.rs: 1 direct calls, not 0",
        ]
    );
}

/// stdout belongs to the protocol in ACP mode. Only these modules may write to it: the front
/// ends, the CLI's terminal modes, and the host's default destination of `print` (the REPL's
/// stdout is the user's).
const STDOUT_WRITERS: &[&str] = &["src/cli/", "src/front/", "src/lisp/host.rs"];

/// The sources outside `STDOUT_WRITERS` that print or take a handle on stdout.
fn stdout_writers(files: &[File]) -> Vec<String> {
    files
        .iter()
        .filter(|(rel, text)| {
            let c = code(text);
            let writes = c.contains("println!(")
                || c.contains("print!(")
                || c.contains("stdout()")
                || c.contains("io::stdout");
            writes && !STDOUT_WRITERS.iter().any(|w| rel.starts_with(w))
        })
        .map(|(rel, _)| rel.clone())
        .collect()
}

#[test]
fn only_the_frontends_write_to_stdout() {
    assert_none(
        &stdout_writers(&tree::rust_sources()),
        "stdout written outside the frontends",
    );
}

#[test]
fn the_stdout_check_finds_a_planted_violation() {
    let files = planted(&[
        ("src/front/print.rs", "println!(\"{answer}\");"),
        ("src/lisp/host.rs", "let out = std::io::stdout();"),
        ("src/llm/fold.rs", "// println!(\"debug\");"),
        ("src/agent/mod.rs", "println!(\"{event:?}\");"),
        ("src/tools/bash.rs", "print!(\"{chunk}\");"),
        ("src/session/mod.rs", "let mut out = io::stdout().lock();"),
    ]);
    assert_eq!(
        stdout_writers(&files),
        [
            "src/agent/mod.rs",
            "src/tools/bash.rs",
            "src/session/mod.rs"
        ]
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

/// The I/O a pure module's code names, and the `pure` modules that no longer exist, so the list
/// cannot outlive them.
fn impure(files: &[File], pure: &[&str]) -> Vec<String> {
    const IO_MARKERS: [&str; 6] = [
        "std::fs",
        "std::net",
        "std::process",
        "tokio::",
        "reqwest",
        "std::io::std",
    ];
    let mut offenders = Vec::new();
    for p in pure {
        let Some((_, text)) = files.iter().find(|(rel, _)| rel == p) else {
            offenders.push(format!(
                "{p} is listed as pure but does not exist; update the list"
            ));
            continue;
        };
        let c = code(text);
        for marker in IO_MARKERS.iter().filter(|m| c.contains(*m)) {
            offenders.push(format!("{p} is meant to be pure but uses {marker}"));
        }
    }
    offenders
}

#[test]
fn pure_modules_do_no_io() {
    assert_none(&impure(&tree::rust_sources(), PURE), "impure pure modules");
}

#[test]
fn the_purity_check_finds_a_planted_violation() {
    let files = planted(&[
        ("src/llm/sse.rs", "// std::fs in a comment\nfn decode() {}"),
        (
            "src/llm/fold.rs",
            "use tokio::io::AsyncReadExt;\nstd::fs::read(p)",
        ),
        ("src/llm/io.rs", "use std::fs;"),
    ]);
    assert_eq!(
        impure(
            &files,
            &["src/llm/sse.rs", "src/llm/fold.rs", "src/gone.rs"]
        ),
        [
            "src/llm/fold.rs is meant to be pure but uses std::fs",
            "src/llm/fold.rs is meant to be pure but uses tokio::",
            "src/gone.rs is listed as pure but does not exist; update the list",
        ]
    );
}
