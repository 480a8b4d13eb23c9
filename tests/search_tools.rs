//! The built-in search tools `grep`, `find` and `ls` on real files: ripgrep and the Rust
//! fallback give the same answers (ignore files, hidden and binary files, context, limits), and
//! the Lisp tools reach them through the real binary.

use std::fs;
use std::path::Path;
use std::process::Command;

mod support;

use oml::cancel::CancelToken;
use oml::tools::{self, GrepArgs};

/// A small project: a git repository with an ignored folder, a hidden file and a binary file.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    fs::create_dir_all(root.join(".git")).unwrap();
    fs::create_dir_all(root.join("src/deep")).unwrap();
    fs::create_dir_all(root.join("target")).unwrap();
    fs::write(root.join(".gitignore"), "target/\n").unwrap();
    fs::write(
        root.join("src/main.rs"),
        "fn main() {\n    helper();\n}\n\nfn helper() {\n    // TODO: more\n}\n",
    )
    .unwrap();
    fs::write(root.join("src/deep/lib.rs"), "pub fn helper_two() {}\n").unwrap();
    fs::write(root.join("README.md"), "# Demo\nTODO: write docs\n").unwrap();
    fs::write(root.join("target/out.rs"), "fn helper() {} // ignored\n").unwrap();
    fs::write(root.join(".hidden.rs"), "fn helper() {} // hidden\n").unwrap();
    fs::write(root.join("blob.bin"), b"helper\0\x01\x02binary").unwrap();
    dir
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn grep(root: &Path, args: GrepArgs, ripgrep: bool) -> tools::ToolOutput {
    runtime().block_on(tools::grep(root, &args, ripgrep, &CancelToken::new()))
}

fn args(pattern: &str) -> GrepArgs {
    GrepArgs {
        pattern: pattern.to_owned(),
        ..GrepArgs::default()
    }
}

/// Whether ripgrep is here; under CI it must be (scripts/setup.sh installs it), and the
/// ripgrep half of each case fails instead of being skipped.
fn have_ripgrep() -> bool {
    let found = tools::grep::ripgrep_path().is_some();
    if !found {
        support::home::skip(
            "ripgrep (rg), for the ripgrep half of the search tests",
            "apt-get install ripgrep (scripts/setup.sh does)",
        );
    }
    found
}

/// Each case runs with the fallback, and with ripgrep when it is installed: same output.
fn both(root: &Path, make: impl Fn() -> GrepArgs, expected: &str) {
    let fallback = grep(root, make(), false);
    assert!(!fallback.is_error, "{}", fallback.content);
    assert_eq!(fallback.content, expected, "fallback");
    if have_ripgrep() {
        let rg = grep(root, make(), true);
        assert_eq!(rg.content, expected, "ripgrep");
    }
}

#[test]
fn grep_skips_ignored_hidden_and_binary_files_and_sorts_by_path() {
    let dir = project();
    both(
        dir.path(),
        || args("helper"),
        "src/deep/lib.rs:1:pub fn helper_two() {}\nsrc/main.rs:2:    helper();\nsrc/main.rs:5:fn helper() {",
    );
}

#[test]
fn grep_table() {
    let dir = project();
    let cases: Vec<(&str, GrepArgs, &str)> = vec![
        (
            "a glob",
            GrepArgs {
                glob: Some("*.md".into()),
                ..args("TODO")
            },
            "README.md:2:TODO: write docs",
        ),
        (
            "a path",
            GrepArgs {
                path: Some("src/deep".into()),
                ..args("helper")
            },
            "src/deep/lib.rs:1:pub fn helper_two() {}",
        ),
        (
            "ignore case",
            GrepArgs {
                ignore_case: true,
                ..args("demo")
            },
            "README.md:1:# Demo",
        ),
        (
            "a literal pattern",
            GrepArgs {
                literal: true,
                ..args("helper();")
            },
            "src/main.rs:2:    helper();",
        ),
        (
            "context, with -- between groups and files",
            GrepArgs {
                context: 1,
                ..args("TODO")
            },
            "README.md-1-# Demo\nREADME.md:2:TODO: write docs\n--\nsrc/main.rs-5-fn helper() {\nsrc/main.rs:6:    // TODO: more\nsrc/main.rs-7-}",
        ),
        (
            "a limit",
            GrepArgs {
                limit: Some(1),
                ..args("helper")
            },
            "src/deep/lib.rs:1:pub fn helper_two() {}\n[2 more lines not shown; narrow the search or raise limit]",
        ),
        ("no match", args("nothing-like-this"), "No matches."),
    ];
    for (name, case, expected) in cases {
        let fallback = grep(dir.path(), case.clone(), false);
        assert_eq!(fallback.content, expected, "fallback: {name}");
        if have_ripgrep() {
            assert_eq!(grep(dir.path(), case, true).content, expected, "rg: {name}");
        }
    }
}

#[test]
fn grep_errors_are_results_the_model_reads() {
    let dir = project();
    let empty = grep(dir.path(), args(""), false);
    assert!(empty.is_error);
    assert_eq!(empty.content, "pattern is required");
    let missing = grep(
        dir.path(),
        GrepArgs {
            path: Some("nope".into()),
            ..args("x")
        },
        false,
    );
    assert!(missing.is_error);
    assert!(
        missing.content.starts_with("File not found: "),
        "{}",
        missing.content
    );
    for ripgrep in [false, true] {
        if ripgrep && !have_ripgrep() {
            continue;
        }
        let bad = grep(dir.path(), args("fn ("), ripgrep);
        assert!(bad.is_error, "rg={ripgrep}: {}", bad.content);
        assert!(bad.content.starts_with("grep failed: "), "{}", bad.content);
    }
}

#[test]
fn grep_cuts_long_lines_and_invalid_utf8_is_shown_lossily() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("needle {}\n", "x".repeat(2000));
    fs::write(dir.path().join("long.txt"), &long).unwrap();
    fs::write(dir.path().join("latin1.txt"), b"needle caf\xe9\n").unwrap();
    let out = grep(dir.path(), args("needle"), false);
    let lines: Vec<&str> = out.content.lines().collect();
    assert_eq!(lines[0], "latin1.txt:1:needle caf\u{fffd}");
    assert!(lines[1].ends_with("..."), "{}", lines[1]);
    assert_eq!(
        lines[1].chars().count(),
        tools::search::SEARCH_MAX_LINE_CHARS + 3
    );
}

#[test]
fn find_matches_globs_on_path_segments() {
    let dir = project();
    let cancel = CancelToken::new();
    let cases = [
        ("**/*.rs", None, "src/deep/lib.rs\nsrc/main.rs"),
        ("*.md", None, "README.md"),
        ("*.rs", None, "No files found."),
        ("*.rs", Some("src"), "src/main.rs"),
        ("src/{main,nothing}.rs", None, "src/main.rs"),
    ];
    for (pattern, path, expected) in cases {
        let out = tools::find(dir.path(), pattern, path, None, &cancel);
        assert!(!out.is_error, "{pattern}: {}", out.content);
        assert_eq!(out.content, expected, "{pattern} in {path:?}");
    }
    let limited = tools::find(dir.path(), "**/*.rs", None, Some(1), &cancel);
    assert_eq!(
        limited.content,
        "src/deep/lib.rs\n[1 more paths not shown; narrow the search or raise limit]"
    );
    let bad = tools::find(dir.path(), "a[", None, None, &cancel);
    assert!(
        bad.is_error && bad.content.starts_with("Invalid glob a["),
        "{}",
        bad.content
    );
    let not_dir = tools::find(dir.path(), "*", Some("README.md"), None, &cancel);
    assert!(not_dir.is_error && not_dir.content.starts_with("Not a directory: "));
}

#[test]
fn ls_lists_entries_sorted_with_kinds() {
    let dir = project();
    std::os::unix::fs::symlink("README.md", dir.path().join("link")).unwrap();
    let out = tools::ls(dir.path(), None, None);
    assert_eq!(
        out.content,
        ".git/\n.gitignore\n.hidden.rs\nREADME.md\nblob.bin\nlink@\nsrc/\ntarget/"
    );
    assert_eq!(
        tools::ls(dir.path(), Some("src"), None).content,
        "deep/\nmain.rs"
    );
    fs::create_dir(dir.path().join("empty")).unwrap();
    assert_eq!(
        tools::ls(dir.path(), Some("empty"), None).content,
        "(empty directory)"
    );
    let missing = tools::ls(dir.path(), Some("nope"), None);
    assert!(missing.is_error && missing.content.starts_with("File not found: "));
}

/// The Lisp tools, through the real binary: the schema the model is offered and a call.
#[test]
fn the_search_tools_are_built_in_tools() {
    let dir = project();
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_oml"))
        .args([
            "--no-init",
            "eval",
            r#"(let [names (icollect [_ e (ipairs (agent.tools))] e.name)
                    grep (agent.find-tool :grep)]
                [(table.concat names " ")
                 (. (agent.tool-spec grep) :parameters :required 1)
                 (. ((. grep :fn) {:pattern "helper_two"}) :content)
                 (. ((. (agent.find-tool :find) :fn) {:pattern "*.md"}) :content)
                 (. ((. (agent.find-tool :ls) :fn) {:path "src"}) :content)])"#,
        ])
        .current_dir(dir.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_STATE_HOME", home.path().join("state"))
        .env("XDG_CACHE_HOME", home.path().join("cache"))
        .output()
        .expect("run oml");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(
            r#""bash edit find grep ls read task task_output task_stop update_plan write""#
        ),
        "{stdout}"
    );
    assert!(stdout.contains(r#""pattern""#), "{stdout}");
    assert!(
        stdout.contains(r#""src/deep/lib.rs:1:pub fn helper_two() {}""#),
        "{stdout}"
    );
    assert!(stdout.contains(r#""README.md""#), "{stdout}");
    assert!(stdout.contains("\"deep/\nmain.rs\""), "{stdout}");
}

#[test]
fn a_cancelled_search_stops_with_an_error() {
    let dir = project();
    let cancel = CancelToken::new();
    cancel.cancel();
    for ripgrep in [false, true] {
        if ripgrep && !have_ripgrep() {
            continue;
        }
        let out = runtime().block_on(tools::grep(dir.path(), &args("helper"), ripgrep, &cancel));
        assert!(out.is_error, "rg={ripgrep}: {}", out.content);
        assert_eq!(out.content, "Cancelled");
    }
    let found = tools::find(dir.path(), "**/*.rs", None, None, &cancel);
    assert!(
        found.is_error && found.content == "Cancelled",
        "{}",
        found.content
    );
}
