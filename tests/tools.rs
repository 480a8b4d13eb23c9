//! The built-in tools against real files in temporary directories and real `bash` processes.
//!
//! The first test of each group is the Clojure original's acceptance test (`oml.tools-test`);
//! the rest cover what the Rust version adds: multi-edits, line endings, atomic writes, binary
//! files, bounded output, and killing whole process trees.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use oml::cancel::CancelToken;
use oml::tools::bash::CommandEnd;
use oml::tools::{self, Edit, FileDiff, ReadLimits, ToolOutput};
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

fn contents(path: &Path) -> String {
    fs::read_to_string(path).expect("reading back a file")
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("listing a directory")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

fn ok(text: &str) -> ToolOutput {
    ToolOutput::ok(text)
}

fn err(text: &str) -> ToolOutput {
    ToolOutput::error(text)
}

/// A command's result that also says, as data, that it exited with `n`.
fn code(n: i32, out: ToolOutput) -> ToolOutput {
    out.with_end(CommandEnd::Code(n))
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
        (
            "\n\n\r\n",
            Some(4),
            Some(0),
            err("limit must be at least 1 (got 0); leave it out to read up to the default"),
        ),
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
            err("limit must be at least 1 (got 0); leave it out to read up to the default"),
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
fn read_and_write_refuse_a_fifo_instead_of_hanging() {
    let dir = temp();
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|status| status.success());
    assert!(made, "mkfifo failed");
    let message = format!("Cannot read {}: not a regular file", fifo.display());
    assert_eq!(
        tools::read(&fifo, None, None, &ReadLimits::default()),
        err(&message)
    );
    let message = format!("Cannot write {}: not a regular file", fifo.display());
    assert_eq!(tools::write(&fifo, "x"), err(&message));
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

// --- write

#[test]
fn write_creates_parents_and_reports_utf8_bytes() {
    let dir = temp();
    let path = dir.path().join("a/b/c.txt");
    let out = tools::write(&path, "héllo");
    let expected = ok(&format!("Wrote 6 bytes to {}", path.display())).with_diff(FileDiff {
        path: path.clone(),
        old_text: None,
        new_text: "héllo".into(),
    });
    assert_eq!(out, expected);
    assert_eq!(contents(&path), "héllo");

    let out = tools::write(&path, "new");
    assert_eq!(
        out.diff.and_then(|d| d.old_text).as_deref(),
        Some("héllo"),
        "overwriting reports the old text"
    );
    assert_eq!(contents(&path), "new");
    assert_eq!(
        names_in(&path.with_file_name("")),
        ["c.txt"],
        "no temporary files"
    );
}

#[test]
fn write_keeps_an_executable_executable() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp();
    let path = put(&dir, "run.sh", "#!/bin/sh\n");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = tools::write(&path, "#!/bin/sh\necho hi\n");
    assert!(!out.is_error, "{}", out.content);
    let mode = fs::metadata(&path).expect("metadata").permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
}

#[test]
fn write_onto_a_directory_fails_and_leaves_it_alone() {
    let dir = temp();
    let target = dir.path().join("sub");
    fs::create_dir(&target).expect("mkdir");
    put(&dir, "sub/inside.txt", "kept");
    let out = tools::write(&target, "text");
    assert_eq!(out, err(&format!("Is a directory: {}", target.display())));
    assert_eq!(contents(&target.join("inside.txt")), "kept");
    assert_eq!(names_in(dir.path()), ["sub"]);
}

/// A directory in which no file can be created: mode 0555, or, for root (who ignores modes),
/// the immutable attribute. Undone on drop.
struct Unwritable {
    dir: PathBuf,
    immutable: bool,
}

impl Unwritable {
    fn make(dir: &Path) -> Option<Self> {
        use std::os::unix::fs::PermissionsExt;
        let can_create = || {
            let probe = dir.join(".probe");
            let created = fs::write(&probe, "").is_ok();
            let _ = fs::remove_file(&probe);
            created
        };
        fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).ok()?;
        if !can_create() {
            return Some(Self {
                dir: dir.to_path_buf(),
                immutable: false,
            });
        }
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).ok()?;
        let chattr = |flag: &str| {
            std::process::Command::new("chattr")
                .arg(flag)
                .arg(dir)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if chattr("+i") && !can_create() {
            return Some(Self {
                dir: dir.to_path_buf(),
                immutable: true,
            });
        }
        chattr("-i");
        None
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if self.immutable {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.dir)
                .status();
        } else {
            let _ = fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o755));
        }
    }
}

#[test]
fn write_and_edit_in_an_unwritable_directory_fail_and_leave_the_original() {
    let dir = temp();
    let locked = dir.path().join("locked");
    fs::create_dir(&locked).expect("mkdir");
    let path = locked.join("f.txt");
    fs::write(&path, "original\n").expect("fixture");
    let Some(_unwritable) = Unwritable::make(&locked) else {
        return support::home::skip(
            "a way to make a directory unwritable (mode 0555 does not stop root, and chattr +i \
             failed)",
            "run the tests as a user other than root, or apt-get install -y e2fsprogs for \
             chattr on a filesystem with the immutable attribute (and CAP_LINUX_IMMUTABLE)",
        );
    };
    let prefix = format!("Cannot create a temporary file in {}: ", locked.display());

    let out = tools::write(&path, "replaced\n");
    assert!(
        out.is_error && out.content.starts_with(&prefix),
        "{}",
        out.content
    );
    let out = tools::edit(&path, &[edit("original", "edited")]);
    assert!(
        out.is_error && out.content.starts_with(&prefix),
        "{}",
        out.content
    );

    assert_eq!(contents(&path), "original\n");
    assert_eq!(names_in(&locked), ["f.txt"]);
}

// --- edit

fn edit(old: &str, new: &str) -> Edit {
    Edit {
        old_text: old.into(),
        new_text: new.into(),
    }
}

#[test]
fn edit_requires_a_unique_match() {
    let dir = temp();
    let path = put(&dir, "f.txt", "one\ntwo\ntwo\nthree\n");
    let f = path.display();

    let out = tools::edit(&path, &[edit("four", "4")]);
    let expected =
        format!("old_text not found in {f}. It must match the file exactly, including whitespace.");
    assert_eq!(out, err(&expected));

    let out = tools::edit(&path, &[edit("two", "2")]);
    let expected = format!(
        "old_text matches 2 times in {f}. Include more surrounding context so it matches exactly once."
    );
    assert_eq!(out, err(&expected));
    assert_eq!(
        contents(&path),
        "one\ntwo\ntwo\nthree\n",
        "unchanged after failures"
    );

    let out = tools::edit(&path, &[edit("two\nthree", "2\n3")]);
    assert!(
        out.content.starts_with(&format!("Edited {f}\n")),
        "{}",
        out.content
    );
    assert!(!out.is_error);
    assert_eq!(contents(&path), "one\ntwo\n2\n3\n");
}

#[test]
fn edit_returns_a_unified_diff_and_the_whole_change() {
    let dir = temp();
    let text: String = (1..=20).map(|n| format!("line {n}\n")).collect();
    let path = put(&dir, "f.txt", &text);
    let out = tools::edit(
        &path,
        &[
            edit("line 3\n", "line three\n"),
            edit("line 18\nline 19\n", ""),
        ],
    );
    let expected = format!(
        "Edited {}\n\
         @@ -1,6 +1,6 @@\n line 1\n line 2\n-line 3\n+line three\n line 4\n line 5\n line 6\n\
         @@ -15,6 +15,4 @@\n line 15\n line 16\n line 17\n-line 18\n-line 19\n line 20",
        path.display()
    );
    let new_text = text
        .replace("line 3\n", "line three\n")
        .replace("line 18\nline 19\n", "");
    let diff = FileDiff {
        path: path.clone(),
        old_text: Some(text),
        new_text: new_text.clone(),
    };
    assert_eq!(out, ok(&expected).with_diff(diff));
    assert_eq!(contents(&path), new_text);
}

#[test]
fn edit_failures_name_the_edit_and_change_nothing() {
    let dir = temp();
    let original = "alpha beta gamma delta\n";
    let path = put(&dir, "f.txt", original);
    let f = path.display().to_string();
    let cases = [
        (
            vec![edit("alpha", "A"), edit("omega", "O")],
            format!(
                "edit 2: old_text not found in {f}. It must match the file exactly, including whitespace."
            ),
        ),
        (
            vec![edit("a", "A"), edit("beta", "B")],
            format!(
                "edit 1: old_text matches 6 times in {f}. Include more surrounding context so it matches exactly once."
            ),
        ),
        (
            vec![
                edit("gamma", "G"),
                edit("alpha beta", "AB"),
                edit("beta gamma", "BG"),
            ],
            format!(
                "edits 2 and 3 overlap in {f}. Merge them into one edit, or make them replace separate text."
            ),
        ),
        (
            vec![edit("beta", "B"), edit("", "x")],
            "edit 2: old_text must be a non-empty string".to_owned(),
        ),
        (
            vec![],
            "edits must be a non-empty list of {old_text, new_text} objects".to_owned(),
        ),
    ];
    for (edits, message) in cases {
        assert_eq!(tools::edit(&path, &edits), err(&message));
        assert_eq!(contents(&path), original);
    }
}

#[test]
fn edit_applies_several_edits_against_the_original_text() {
    let dir = temp();
    let path = put(&dir, "f.txt", "alpha beta gamma\n");
    // The second edit's old_text only exists before the first is applied; both are matched
    // against the original, and adjacent (touching) edits are fine.
    let out = tools::edit(
        &path,
        &[
            edit("gamma", "alpha"),
            edit("alpha ", "ALPHA "),
            edit("beta", "B"),
        ],
    );
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(contents(&path), "ALPHA B alpha\n");
}

#[test]
fn edit_keeps_crlf_line_endings_and_a_byte_order_mark() {
    let dir = temp();
    let cases = [
        // An LF-written old_text matches CRLF text; the replacement gets CRLF.
        (
            "a\r\nb\r\nc\r\n",
            edit("a\nb\n", "x\ny\nz\n"),
            "x\r\ny\r\nz\r\nc\r\n",
        ),
        // CRLF in old_text works too, and untouched lines keep their bytes.
        ("a\r\nb\r\nc\r\n", edit("b\r\nc", "B"), "a\r\nB\r\n"),
        // Mixed endings: text outside the edit is byte-identical.
        (
            "a\nb\r\nc\r\nd\r\n",
            edit("c", "C1\nC2"),
            "a\nb\r\nC1\r\nC2\r\nd\r\n",
        ),
        // An LF file stays LF, even when new_text arrives with CRLF.
        ("a\nb\n", edit("a", "x\r\ny"), "x\ny\nb\n"),
        // A byte-order mark is kept and need not be matched.
        (
            "\u{FEFF}first\r\nsecond\r\n",
            edit("first\nsecond", "only"),
            "\u{FEFF}only\r\n",
        ),
        ("\u{FEFF}x", edit("x", "y"), "\u{FEFF}y"),
    ];
    for (i, (before, change, after)) in cases.into_iter().enumerate() {
        let path = put(&dir, &format!("case{i}.txt"), before);
        let out = tools::edit(&path, std::slice::from_ref(&change));
        assert!(!out.is_error, "{before:?}: {}", out.content);
        assert_eq!(contents(&path), after, "editing {before:?} with {change:?}");
    }
}

#[test]
fn edit_shows_line_endings_as_lf_in_its_diff() {
    let dir = temp();
    let path = put(&dir, "f.txt", "a\r\nb\r\n");
    let out = tools::edit(&path, &[edit("b", "c")]);
    let expected = format!("Edited {}\n@@ -1,2 +1,2 @@\n a\n-b\n+c", path.display());
    assert_eq!(out.content, expected);
}

#[test]
fn edit_refuses_missing_files_directories_and_non_text() {
    let dir = temp();
    let missing = dir.path().join("missing.txt");
    let binary = put(&dir, "bin.dat", b"\xff\xfeold");
    let cases = [
        (
            missing.clone(),
            format!("File not found: {}", missing.display()),
        ),
        (
            dir.path().to_path_buf(),
            format!("File not found: {}", dir.path().display()),
        ),
        (
            binary.clone(),
            format!(
                "Cannot edit {}: it is not valid UTF-8 text",
                binary.display()
            ),
        ),
    ];
    for (path, message) in cases {
        assert_eq!(tools::edit(&path, &[edit("old", "new")]), err(&message));
    }
}

#[test]
fn edit_finds_its_line_in_a_ten_megabyte_file() {
    let dir = temp();
    let text: String = (0..400_000)
        .map(|n| format!("row {n:>8} abcdefghij\n"))
        .collect();
    let path = put(&dir, "big.txt", &text);
    let out = tools::edit(&path, &[edit("row   200000 ", "ROW   200000 ")]);
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content
            .contains("-row   200000 abcdefghij\n+ROW   200000 abcdefghij")
    );
    assert!(out.content.starts_with(&format!(
        "Edited {}\n@@ -199998,7 +199998,7 @@",
        path.display()
    )));
}

// --- bash
//
// A `sleep 3600` in a command below is the scenario: a process that runs until it is cancelled,
// timed out or killed. No test waits a fixed time for the command to get somewhere: it waits
// for a file the command writes.

/// Whether `pid` is a live process (a zombie is dead: it only waits to be reaped).
fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// Wait until none of `pids` is alive, up to `limit`; the ones still alive.
fn survivors(pids: &[i32], limit: Duration) -> Vec<i32> {
    let alive_now = || -> Vec<i32> { pids.iter().copied().filter(|&pid| alive(pid)).collect() };
    support::home::poll_until(limit, || alive_now().is_empty());
    alive_now()
}

/// The pids a command wrote to `file`, one per line, once there are `n` of them.
async fn wait_for_pids(file: &Path, n: usize) -> Vec<i32> {
    let read = || -> Vec<i32> {
        fs::read_to_string(file)
            .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    };
    let written =
        support::home::poll_until_async(Duration::from_secs(20), || read().len() >= n).await;
    assert!(
        written,
        "the command did not write {n} pids to {}",
        file.display()
    );
    read()
}

async fn run_bash(command: &str, cwd: &Path) -> ToolOutput {
    let cancel = CancelToken::new();
    tools::bash(
        command,
        cwd,
        Duration::from_secs(20),
        tools::BASH_MAX_CHARS,
        &cancel,
    )
    .await
}

#[tokio::test]
async fn bash_output_exit_and_timeout() {
    let dir = temp();
    assert_eq!(
        run_bash("echo out; echo err >&2", dir.path()).await,
        code(0, ok("out\nerr"))
    );
    let out = run_bash("exit 3", dir.path()).await;
    assert!(
        out.is_error && out.content.contains("[exit code 3]"),
        "{out:?}"
    );

    let cancel = CancelToken::new();
    let out = tools::bash(
        "sleep 3600",
        dir.path(),
        Duration::from_millis(500),
        1000,
        &cancel,
    )
    .await;
    assert_eq!(
        out,
        err("[command timed out after 0.5s]").with_end(CommandEnd::TimedOut)
    );
}

#[tokio::test]
async fn bash_cancel_kills_the_command() {
    let dir = temp();
    let cancel = CancelToken::new();
    let trigger = cancel.clone();
    // Cancel once the command has written its line and is in its (scenario) sleep.
    let marker = dir.path().join("echoed");
    tokio::spawn(async move {
        let echoed =
            support::home::poll_until_async(Duration::from_secs(20), || marker.exists()).await;
        assert!(echoed, "the command never started");
        trigger.cancel();
    });
    let out = tools::bash(
        "echo started; touch echoed; sleep 3600",
        dir.path(),
        Duration::from_secs(60),
        1000,
        &cancel,
    )
    .await;
    assert_eq!(
        out,
        err("started\n[cancelled]").with_end(CommandEnd::Cancelled)
    );
}

#[tokio::test]
async fn bash_results_match_the_original() {
    let dir = temp();
    let cwd = dir.path().display().to_string();
    let cases = [
        (
            "echo out; echo err >&2; echo out2",
            code(0, ok("out\nerr\nout2")),
        ),
        ("true", code(0, ok("(no output)"))),
        ("printf '   \\n\\n'", code(0, ok("(no output)"))),
        ("printf '  indented  \\n\\n\\n'", code(0, ok("  indented"))),
        ("echo hi; exit 2", code(2, err("hi\n[exit code 2]"))),
        (
            "printf '\\n\\n  spaced\\n'; exit 1",
            code(1, err("spaced\n[exit code 1]")),
        ),
        ("kill -9 $$", code(137, err("[exit code 137]"))),
        ("cat; echo stdin-was-empty", code(0, ok("stdin-was-empty"))),
        ("pwd", code(0, ok(&cwd))),
        ("printf 'caf\\xe9'", code(0, ok("caf\u{FFFD}"))),
        ("  ", err("command is required")),
    ];
    for (command, expected) in cases {
        assert_eq!(
            run_bash(command, dir.path()).await,
            expected,
            "running {command:?}"
        );
    }
    let missing = dir.path().join("missing");
    let cancel = CancelToken::new();
    let out = tools::bash("true", &missing, Duration::from_secs(5), 100, &cancel).await;
    assert_eq!(
        out,
        err(&format!(
            "Working directory not found: {}",
            missing.display()
        ))
    );
}

#[tokio::test]
async fn bash_keeps_the_tail_of_ten_megabytes_of_output() {
    let dir = temp();
    let out = run_bash("yes abcdefghi | head -n 1000000; echo END", dir.path()).await;
    let whole_tail = format!("{}END", "abcdefghi\n".repeat(5001));
    let tail = &whole_tail[whole_tail.len() - tools::BASH_MAX_CHARS..];
    let expected = format!(
        "[output truncated: first {} characters dropped]\n{tail}",
        10_000_003 - tools::BASH_MAX_CHARS
    );
    assert_eq!(out, code(0, ok(&expected)));
}

#[tokio::test]
async fn bash_cancel_kills_grandchildren() {
    let dir = temp();
    let pids = dir.path().join("pids");
    let command = "sleep 3600 & echo $! >> pids; (sleep 3600 & echo $! >> pids; wait) & wait";
    let cancel = CancelToken::new();
    let run = tools::bash(command, dir.path(), Duration::from_secs(60), 1000, &cancel);
    let watcher = async {
        let found = wait_for_pids(&pids, 2).await;
        cancel.cancel();
        found
    };
    let (out, found) = tokio::join!(run, watcher);
    assert_eq!(out, err("[cancelled]").with_end(CommandEnd::Cancelled));
    assert_eq!(survivors(&found, Duration::from_secs(2)), Vec::<i32>::new());
}

#[tokio::test]
async fn bash_timeout_kills_a_grandchild_that_ignores_sigterm() {
    let dir = temp();
    let command = "(trap '' TERM; exec sleep 3600) & echo $! > pids; wait";
    let cancel = CancelToken::new();
    let out = tools::bash(
        command,
        dir.path(),
        Duration::from_millis(700),
        1000,
        &cancel,
    )
    .await;
    assert_eq!(
        out,
        err("[command timed out after 0.7s]").with_end(CommandEnd::TimedOut)
    );
    let found = wait_for_pids(&dir.path().join("pids"), 1).await;
    assert_eq!(survivors(&found, Duration::from_secs(1)), Vec::<i32>::new());
}

#[tokio::test]
async fn bash_returns_although_a_background_process_holds_the_pipe() {
    let dir = temp();
    let out = run_bash("sleep 3600 & echo $!", dir.path()).await;
    let pid: i32 = out.content.trim().parse().expect("the background pid");
    assert!(!out.is_error);
    // It was asked to run in the background, so it still does; clean it up.
    assert!(alive(pid));
    // SAFETY: a plain kill of the process this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

#[tokio::test]
async fn bash_killed_by_dropping_its_future_leaves_no_process() {
    let dir = temp();
    let pids = dir.path().join("pids");
    let cancel = CancelToken::new();
    let run = tools::bash(
        "sleep 3600 & echo $! > pids; wait",
        dir.path(),
        Duration::from_secs(60),
        100,
        &cancel,
    );
    let found = tokio::select! {
        _ = run => panic!("the command should still be running"),
        found = wait_for_pids(&pids, 1) => found,
    };
    assert_eq!(survivors(&found, Duration::from_secs(2)), Vec::<i32>::new());
}

/// Run by `bash_never_writes_to_our_stdout` in a child test process; it passes on its own too.
#[tokio::test]
#[ignore = "run in a child process by bash_never_writes_to_our_stdout"]
async fn bash_child_process_probe() {
    let dir = temp();
    let out = run_bash("echo probe-7c1e-out; echo probe-7c1e-err >&2", dir.path()).await;
    assert_eq!(out, code(0, ok("probe-7c1e-out\nprobe-7c1e-err")));
}

#[test]
fn bash_never_writes_to_our_stdout() {
    let exe = std::env::current_exe().expect("the test binary");
    let child = std::process::Command::new(exe)
        .args([
            "--exact",
            "bash_child_process_probe",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .expect("running the test binary");
    let stdout = String::from_utf8_lossy(&child.stdout);
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(child.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("1 passed"), "the probe ran: {stdout}");
    assert!(
        !stdout.contains("probe-7c1e"),
        "bash output leaked to stdout: {stdout}"
    );
    assert!(
        !stderr.contains("probe-7c1e"),
        "bash output leaked to stderr: {stderr}"
    );
}
