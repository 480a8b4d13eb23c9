//! A session on a full disk, against the real binary: a tiny tmpfs holds the state folder, a
//! filler file takes its last byte, and deleting the filler gives the space back.
//!
//! The tmpfs is mounted in a mount namespace of its own, by a holder process started with
//! `unshare --user --map-root-user --mount` (no root needed where user namespaces are allowed),
//! and oml reaches it through `/proc/<holder>/root/…`; the mount goes when the holder does.
//! Where no user namespace can be made, the tests fail under CI (see `support::home::skip`).

mod support;

use std::io::{BufRead, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use support::editor::Editor;
use support::fake_model::{FakeModel, Reply, text_chunks};
use support::home::Env;

/// How to get a user namespace where the tests cannot make one.
const INSTALL_USERNS: &str = "install util-linux (unshare) and allow unprivileged user \
     namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu \
     kernel.apparmor_restrict_unprivileged_userns=0), or run the tests as root";

/// A tiny tmpfs, mounted in the namespace of a holder process.
struct TinyFs {
    holder: Child,
    /// The mount point as every process sees it (through the holder's root).
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TinyFs {
    /// A tmpfs of `bytes`, or why none can be had here.
    fn mount(bytes: usize) -> Result<TinyFs, String> {
        let dir = tempfile::Builder::new()
            .prefix("oml-disk")
            .tempdir_in("/tmp")
            .map_err(|e| e.to_string())?;
        let point = std::fs::canonicalize(dir.path())
            .map_err(|e| e.to_string())?
            .join("disk");
        std::fs::create_dir(&point).map_err(|e| e.to_string())?;
        let script = format!(
            "mount -t tmpfs -o size={bytes},mode=0700 oml-test '{}' && echo mounted && exec sleep infinity",
            point.display()
        );
        let mut holder = Command::new("unshare")
            .args(["--user", "--map-root-user", "--mount", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run unshare: {e}"))?;
        let mut line = String::new();
        let stdout = holder.stdout.take().expect("the holder's stdout");
        let _ = BufReader::new(stdout).read_line(&mut line);
        if line.trim() != "mounted" {
            let _ = holder.kill();
            let mut err = String::new();
            if let Some(mut e) = holder.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            let _ = holder.wait();
            return Err(format!("cannot mount a tmpfs in a user namespace: {err}"));
        }
        let path = PathBuf::from(format!("/proc/{}/root", holder.id()))
            .join(point.strip_prefix("/").expect("an absolute path"));
        Ok(TinyFs {
            holder,
            path,
            _dir: dir,
        })
    }

    /// The tmpfs, or `None` after [`support::home::skip`] (which fails under CI).
    fn get(bytes: usize) -> Option<TinyFs> {
        match TinyFs::mount(bytes) {
            Ok(fs) => Some(fs),
            Err(why) => {
                support::home::skip(&why, INSTALL_USERNS);
                None
            }
        }
    }

    /// Take every free byte with a filler file.
    fn fill(&self) {
        let mut f = std::fs::File::create(self.path.join("filler")).expect("create the filler");
        let block = vec![0u8; 4096];
        loop {
            match f.write(&block) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        // A page may still be partly free: take the last bytes one at a time.
        while f.write(&[0u8]).is_ok_and(|n| n == 1) {}
    }

    /// Give the space back.
    fn free(&self) {
        std::fs::remove_file(self.path.join("filler")).expect("remove the filler");
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// `oml ARGS…` in `env` with its state folder on `disk`.
fn command(env: &Env, disk: &TinyFs, fake: &FakeModel, args: &[&str]) -> Command {
    let mut cmd = env.command(Some(fake), args);
    cmd.env("XDG_STATE_HOME", &disk.path);
    cmd
}

/// `oml acp` from `cmd`, initialised: the scripted editor of `support::editor`.
fn start(cmd: Command) -> Editor {
    let mut ed = Editor::spawn(cmd);
    ed.initialize();
    ed
}

/// Send a request; the messages before its answer, and the answer.
fn call(ed: &mut Editor, method: &str, params: Value) -> (Vec<Value>, Value) {
    let id = ed.request(method, params);
    ed.until_response(id)
}

/// A text prompt; the messages before its answer, and the answer.
fn prompt(ed: &mut Editor, sid: &str, text: &str) -> (Vec<Value>, Value) {
    let id = ed.prompt(sid, text);
    ed.until_response(id)
}

/// The text of the agent_message_chunk updates among `messages`.
fn agent_text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

/// The session file's lines, each checked to be one complete JSON object.
fn file_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("read the session file");
    assert!(text.ends_with('\n'), "the file ends on a complete line");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a torn line {l:.80}: {e}")))
        .collect()
}

/// The transcript's (role, content) pairs in the file.
fn messages(lines: &[Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter(|l| l["type"] == "message")
        .map(|l| {
            let m = &l["message"];
            let text = m["content"].as_str().unwrap_or_default();
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                text.chars().take(12).collect(),
            )
        })
        .collect()
}

/// The full-disk story over ACP: a turn whose records the disk refuses is answered with a
/// notice and `_meta.oml.unsaved`; once space returns, the next turn writes the kept entries
/// before its own (no line torn or missing); and a session whose file is intact loads on a
/// full disk.
#[test]
fn a_full_disk_is_reported_and_what_was_kept_is_written_when_space_returns() {
    let Some(disk) = TinyFs::get(256 * 1024) else {
        return;
    };
    let env = Env::new();
    let long = "x".repeat(100_000);
    let fake = FakeModel::start([
        Reply::from(text_chunks(&["first answer ", &long])),
        Reply::from(text_chunks(&["second answer"])),
        Reply::from(text_chunks(&["third answer ", &long])),
    ]);
    let mut acp = start(command(&env, &disk, &fake, &["acp"]));
    let cwd = env.project.display().to_string();
    let (_, r) = call(
        &mut acp,
        "session/new",
        json!({"cwd": cwd, "mcpServers": []}),
    );
    let sid = r["result"]["sessionId"]
        .as_str()
        .expect("a session")
        .to_owned();

    disk.fill();
    let (updates, answer) = prompt(&mut acp, &sid, "first question");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let unsaved = &answer["result"]["_meta"]["oml"]["unsaved"];
    assert!(
        unsaved["bytes"].as_u64().is_some_and(|n| n > 100_000),
        "{answer}"
    );
    let error = unsaved["error"].as_str().unwrap_or_default();
    assert!(error.contains("No space left on device"), "{answer}");
    let text = agent_text(&updates);
    assert!(
        text.contains("This session could not be saved: No space left"),
        "{text:.300}"
    );

    disk.free();
    let (updates, answer) = prompt(&mut acp, &sid, "second question");
    assert_eq!(
        answer["result"]["_meta"]["oml"].get("unsaved"),
        None,
        "{answer}"
    );
    assert!(agent_text(&updates).contains("The session is saved again"));
    acp.finish();

    let file = disk.path.join(format!("oml/sessions/{sid}.jsonl"));
    let lines = file_lines(&file);
    let said: Vec<_> = messages(&lines);
    let pairs = |r: &str, t: &str| (r.to_owned(), t.to_owned());
    assert_eq!(
        said,
        [
            pairs("user", "first questi"),
            pairs("assistant", "first answer"),
            pairs("user", "second quest"),
            pairs("assistant", "second answe"),
        ]
    );

    // An intact file loads with no byte free; the turn after says it is not saved.
    disk.fill();
    let mut acp = start(command(&env, &disk, &fake, &["acp"]));
    let (replay, loaded) = call(
        &mut acp,
        "session/load",
        json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
    );
    assert!(loaded.get("error").is_none(), "{loaded}");
    assert!(agent_text(&replay).contains("second answer"));
    let (_, answer) = prompt(&mut acp, &sid, "third question");
    assert!(
        answer["result"]["_meta"]["oml"]["unsaved"].is_object(),
        "{answer}"
    );
    acp.finish();
    // What fitted was written whole; the rest was lost as oml ended, and said so.
    let after = file_lines(&file);
    assert_eq!(after[..lines.len()], lines[..]);
    assert!(!messages(&after).contains(&pairs("assistant", "third answer")));
}

/// Print mode: a turn that cannot be saved ends with status 6 and says why on stderr.
#[test]
fn print_mode_exits_6_when_the_turn_cannot_be_saved() {
    let Some(disk) = TinyFs::get(128 * 1024) else {
        return;
    };
    let env = Env::new();
    // Longer than the slack the last page of the file may have.
    let long = "y".repeat(20_000);
    let fake = FakeModel::start([
        Reply::from(text_chunks(&["one"])),
        Reply::from(text_chunks(&["two", &long])),
        Reply::from(text_chunks(&["three"])),
        Reply::from(text_chunks(&["four", &long])),
    ]);
    let run = |args: &[&str]| {
        let out = command(&env, &disk, &fake, args).output().expect("run oml");
        support::home::Run::from(out)
    };
    let first = run(&["-p", "hello"]);
    assert_eq!(first.code, 0, "{first:?}");
    disk.fill();
    let full = run(&["-p", "--continue", "--json", "again"]);
    assert_eq!(full.code, 6, "{full:?}");
    let lines: Vec<Value> = full
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let notice = lines
        .iter()
        .find(|l| l["type"] == "notice")
        .expect("a notice line");
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.starts_with("This session could not be saved: No space left"),
        "{text}"
    );
    let result = lines.last().unwrap();
    assert_eq!(
        (result["status"].clone(), result["stop_reason"].clone()),
        (json!(6), json!("end_turn"))
    );
    assert!(
        result["unsaved"]["entries"].as_u64().is_some_and(|n| n > 0),
        "{result}"
    );
    disk.free();
    let after = run(&["-p", "--continue", "and now"]);
    assert_eq!(after.code, 0, "{after:?}");
    assert_eq!(after.stdout, "three\n");
    // Without --json the notice is on stderr.
    disk.fill();
    let text = run(&["-p", "--continue", "once more"]);
    assert_eq!(text.code, 6, "{text:?}");
    assert!(
        text.stderr
            .contains("[This session could not be saved: No space left"),
        "{text:?}"
    );
}
