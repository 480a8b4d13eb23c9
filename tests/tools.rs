//! The built-in tools against real files in temporary directories and real `bash` processes.
//!
//! The first test of each group is the Clojure original's acceptance test (`oml.tools-test`);
//! the rest cover what the Rust version adds: multi-edits, line endings, atomic writes, binary
//! files, bounded output, and killing whole process trees.

use std::fs;
use std::path::PathBuf;

use oml::tools::{self, ReadLimits, ToolOutput};
use tempfile::TempDir;

// --- helpers

fn temp() -> TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

fn put(dir: &TempDir, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.path().join(name);
    fs::write(&path, content).expect("writing a fixture");
    path
}

fn ok(text: &str) -> ToolOutput {
    ToolOutput::ok(text)
}

fn err(text: &str) -> ToolOutput {
    ToolOutput::error(text)
}

// --- read

#[test]
fn read_pages_with_line_numbers() {
    let dir = temp();
    let path = put(&dir, "f.txt", "a\nb\nc\n");
    let out = tools::read(&path, Some(2), Some(1), &ReadLimits::default());
    assert_eq!(
        out,
        ok("     2\tb\n[lines 2-2 of 3; use offset=3 to continue]")
    );
}

#[test]
fn read_windows_follow_the_original_rules() {
    type Case = (&'static str, Option<i64>, Option<i64>, ToolOutput);
    let cases: Vec<Case> = vec![
        (
            "a\nb\nc\n",
            None,
            None,
            ok("     1\ta\n     2\tb\n     3\tc"),
        ),
        ("a\nb\nc", Some(3), Some(5), ok("     3\tc")),
        ("a\r\nb\r\n\r\n\n", None, None, ok("     1\ta\n     2\tb")),
        (
            "a\n\nb\n\n\n",
            None,
            None,
            ok("     1\ta\n     2\t\n     3\tb"),
        ),
        (
            "a\n\n\nb",
            Some(2),
            Some(1),
            ok("     2\t\n[lines 2-2 of 4; use offset=3 to continue]"),
        ),
        ("a\r", None, None, ok("     1\ta\r")),
        ("\u{FEFF}x\ny", None, None, ok("     1\tx\n     2\ty")),
        (
            "a\nb\n",
            Some(-5),
            Some(1),
            ok("     1\ta\n[lines 1-1 of 2; use offset=2 to continue]"),
        ),
        ("", None, None, ok("")),
        ("\n\n\r\n", Some(4), Some(0), ok("")),
        (
            "a\nb\n",
            Some(3),
            None,
            err("offset 3 is past the end of the file (2 lines)"),
        ),
        (
            "a\nb\n",
            Some(1),
            Some(0),
            err("offset 1 is past the end of the file (2 lines)"),
        ),
        (
            "a\n\n\n",
            Some(2),
            None,
            err("offset 2 is past the end of the file (1 lines)"),
        ),
    ];
    let dir = temp();
    for (i, (content, offset, limit, expected)) in cases.into_iter().enumerate() {
        let path = put(&dir, &format!("case{i}.txt"), content);
        let out = tools::read(&path, offset, limit, &ReadLimits::default());
        assert_eq!(out, expected, "reading {content:?} at {offset:?}/{limit:?}");
    }
}

#[test]
fn read_pages_by_the_default_limit() {
    let dir = temp();
    let path = put(&dir, "f.txt", "1\n2\n3\n4\n5\n");
    let limits = ReadLimits {
        max_chars: 1000,
        default_limit: 2,
    };
    let out = tools::read(&path, Some(3), None, &limits);
    assert_eq!(
        out,
        ok("     3\t3\n     4\t4\n[lines 3-4 of 5; use offset=5 to continue]")
    );
}

#[test]
fn read_caps_the_head_in_characters_and_puts_the_footer_after_the_cap() {
    let dir = temp();
    let path = put(&dir, "f.txt", "éééééééééé\n😀\n");
    let limits = ReadLimits {
        max_chars: 10,
        default_limit: 1,
    };
    let out = tools::read(&path, None, None, &limits);
    assert_eq!(
        out,
        ok(
            "     1\tééé\n[output truncated: 7 more characters]\n[lines 1-1 of 2; use offset=2 to continue]"
        )
    );
}

#[test]
fn read_caps_a_single_huge_line_without_holding_it() {
    let dir = temp();
    let line = "€".repeat(2_000_000);
    let path = put(&dir, "one-line.txt", format!("{line}\r\nnext\n"));
    let limits = ReadLimits {
        max_chars: 100,
        default_limit: 1,
    };
    let out = tools::read(&path, None, None, &limits);
    let expected = format!(
        "     1\t{}\n[output truncated: {} more characters]\n[lines 1-1 of 2; use offset=2 to continue]",
        "€".repeat(93),
        2_000_000 - 93
    );
    assert_eq!(out, ok(&expected));
}

#[test]
fn read_finds_a_window_in_the_middle_of_a_large_file() {
    let dir = temp();
    let text: String = (1..=200_000).map(|n| format!("line {n}\n")).collect();
    let path = put(&dir, "big.txt", text);
    let out = tools::read(&path, Some(100_000), Some(2), &ReadLimits::default());
    assert_eq!(
        out,
        ok(
            "100000\tline 100000\n100001\tline 100001\n[lines 100000-100001 of 200000; use offset=100002 to continue]"
        )
    );
}

#[test]
fn read_reports_missing_files_and_directories() {
    let dir = temp();
    let missing = dir.path().join("nope.txt");
    let out = tools::read(&missing, None, None, &ReadLimits::default());
    assert_eq!(out, err(&format!("File not found: {}", missing.display())));
    let out = tools::read(dir.path(), None, None, &ReadLimits::default());
    assert_eq!(
        out,
        err(&format!("Is a directory: {}", dir.path().display()))
    );
}

#[test]
fn read_refuses_binary_files_but_not_a_character_cut_by_the_sniff() {
    let dir = temp();
    let nul = put(&dir, "nul.bin", b"abc\0def");
    let latin1 = put(&dir, "latin1.txt", b"caf\xe9\n");
    // "é" straddles the 8 KiB sniff boundary: still text.
    let straddle = put(&dir, "straddle.txt", format!("{}é\nz\n", "a".repeat(8191)));
    let limits = ReadLimits::default();

    let out = tools::read(&nul, None, None, &limits);
    let expected = format!(
        "Cannot read {}: it looks like a binary file (a NUL byte at byte 3)",
        nul.display()
    );
    assert_eq!(out, err(&expected));

    let out = tools::read(&latin1, None, None, &limits);
    let expected = format!(
        "Cannot read {}: it looks like a binary file (invalid UTF-8 at byte 3)",
        latin1.display()
    );
    assert_eq!(out, err(&expected));

    let out = tools::read(&straddle, Some(2), None, &limits);
    assert_eq!(out, ok("     2\tz"));
}
