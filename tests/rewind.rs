//! Checkpoints, rewind and fork end to end: `oml acp` driven by the scripted editor against a
//! scripted model over TCP, real files in a real project, real session files. Edits across
//! turns are rewound to each point (files and the transcript the model sees next, byte for
//! byte); a file changed by someone else is not clobbered; a rewind survives `kill -9`; a fork
//! diverges from its parent; the store's cap holds.

mod support;

use std::fs;
use std::path::Path;

use serde_json::{Value, json};
use support::acp::*;
use support::fake_model::{FakeModel, Reply, Step, text_chunks, tool_call_chunks};
use support::home::Env;
use support::model::user_texts;

/// A reply that makes one tool call.
fn call(id: &str, tool: &str, args: Value) -> Reply {
    Reply::from(tool_call_chunks(id, tool, &[&args.to_string()]))
}

fn say(text: &str) -> Reply {
    Reply::from(text_chunks(&[text]))
}

/// A reply that makes two tool calls at once.
fn two_calls(a: (&str, &str, Value), b: (&str, &str, Value)) -> Reply {
    let mut steps: Vec<Step> = tool_call_chunks(a.0, a.1, &[&a.2.to_string()]);
    let second = tool_call_chunks(b.0, b.1, &[&b.2.to_string()]);
    // Both calls in one message: the second's chunks at index 1, before the finish.
    let finish = steps.pop();
    for step in second {
        if let Step::Chunk(mut c) = step
            && let Some(tc) = c
                .pointer_mut("/choices/0/delta/tool_calls/0")
                .and_then(Value::as_object_mut)
        {
            tc.insert("index".into(), json!(1));
            steps.push(Step::Chunk(c));
        }
    }
    steps.extend(finish);
    Reply::from(steps)
}

fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok()
}

/// The text the agent says in answer to `text` (a slash command's output).
fn command(c: &mut Client, sid: &str, text: &str) -> String {
    let (updates, reason) = c.turn(sid, text);
    assert_eq!(reason, "end_turn", "{updates:?}");
    texts(&updates)
}

/// Three turns of edits, as the scripted model makes them: `a.txt` written, edited and
/// rewritten, `b.txt` created in the second.
fn three_turns(project: &Path) -> Vec<Reply> {
    let a = project.join("a.txt").display().to_string();
    vec![
        call("c1", "write", json!({"path": "a.txt", "content": "one\n"})),
        say("wrote one"),
        two_calls(
            (
                "c2",
                "edit",
                json!({"path": a, "old_text": "one", "new_text": "two"}),
            ),
            ("c3", "write", json!({"path": "b.txt", "content": "bee\n"})),
        ),
        say("wrote two"),
        call(
            "c4",
            "write",
            json!({"path": "a.txt", "content": "three\n"}),
        ),
        say("wrote three"),
    ]
}

#[test]
fn edits_over_three_turns_rewind_to_each_point_files_and_transcript_exact() {
    let env = Env::new();
    let mut replies = three_turns(&env.project);
    replies.push(say("after the rewind"));
    let fake = FakeModel::start(replies);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({}));
    for prompt in ["first", "second", "third"] {
        let (_, reason) = c.turn(&sid, prompt);
        assert_eq!(reason, "end_turn");
    }
    let (a, b) = (env.project.join("a.txt"), env.project.join("b.txt"));
    assert_eq!(read(&a).as_deref(), Some("three\n"));

    let list = command(&mut c, &sid, "/rewind");
    assert!(list.contains("1. first  (1 file changed)"), "{list}");
    assert!(list.contains("2. second  (2 files changed)"), "{list}");
    assert!(list.contains("3. third  (1 file changed)"), "{list}");

    // Back to just before the third prompt: its change undone, the conversation too.
    let out = command(&mut c, &sid, "/rewind 3");
    assert!(
        out.contains("Rewound to just before prompt 3: third"),
        "{out}"
    );
    assert_eq!(read(&a).as_deref(), Some("two\n"));
    assert_eq!(read(&b).as_deref(), Some("bee\n"));
    let (_, reason) = c.turn(&sid, "third, again");
    assert_eq!(reason, "end_turn");
    let requests = fake.requests();
    let before_third = &requests[4].body["messages"];
    let after_rewind = &requests[6].body["messages"];
    let n = before_third.as_array().map_or(0, Vec::len);
    assert!(n > 2);
    assert_eq!(
        before_third.as_array().map(|m| &m[..n - 1]),
        after_rewind.as_array().map(|m| &m[..n - 1]),
        "the model sees the conversation as it was before prompt 3"
    );
    assert_eq!(after_rewind[n - 1]["content"], "third, again");

    // The files of the second prompt, only: the conversation stays.
    let out = command(&mut c, &sid, "/rewind 2 files");
    assert_eq!(read(&a).as_deref(), Some("one\n"), "{out}");
    assert!(!b.exists(), "a file the turn created is removed: {out}");
    let list = command(&mut c, &sid, "/rewind");
    assert!(list.contains("3. third, again"), "{list}");

    // Everything, back to the start.
    let out = command(&mut c, &sid, "/rewind 1");
    assert!(!a.exists(), "{out}");
    assert!(command(&mut c, &sid, "/rewind").contains("No prompts"));
    let out = command(&mut c, &sid, "/rewind 9");
    assert!(out.contains("no prompt 9"), "{out}");
}

#[test]
fn a_file_changed_since_is_not_clobbered_unless_forced() {
    let env = Env::new();
    let fake = FakeModel::start([
        call("c1", "write", json!({"path": "a.txt", "content": "mine\n"})),
        say("done"),
    ]);
    env.file("a.txt", "original\n");
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({}));
    c.turn(&sid, "write it");
    let a = env.project.join("a.txt");
    fs::write(&a, "the user's own edit\n").expect("edit");

    let out = command(&mut c, &sid, "/rewind 1");
    assert!(out.contains("Nothing was rewound."), "{out}");
    assert!(out.contains(&a.display().to_string()), "{out}");
    assert_eq!(read(&a).as_deref(), Some("the user's own edit\n"));
    assert!(
        command(&mut c, &sid, "/rewind").contains("1. write it"),
        "the conversation stays"
    );

    let out = command(&mut c, &sid, "/rewind 1 files force");
    assert!(out.contains("Restored:"), "{out}");
    assert_eq!(read(&a).as_deref(), Some("original\n"));
}

#[test]
fn a_rewind_survives_kill_9_and_a_load_replays_the_rewound_history() {
    let env = Env::new();
    let fake = FakeModel::start(three_turns(&env.project));
    let sid = {
        let mut c = Client::start(&env, Some(&fake));
        let sid = yolo_session(&mut c, &env, json!({}));
        for prompt in ["first", "second", "third"] {
            c.turn(&sid, prompt);
        }
        // SAFETY: kill(2) on the child's own pid.
        unsafe { libc::kill(c.pid() as i32, libc::SIGKILL) };
        sid
    };
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (_, r) = load_session(&mut c, "session/load", &sid, &env.project);
    assert!(r.get("result").is_some(), "{r}");
    while update_kind(&c.next()).as_deref() != Some("available_commands_update") {}
    let out = command(&mut c, &sid, "/rewind 2");
    assert!(out.contains("Rewound to just before prompt 2"), "{out}");
    assert_eq!(read(&env.project.join("a.txt")).as_deref(), Some("one\n"));
    assert!(!env.project.join("b.txt").exists());
    let r = c.call("session/close", json!({"sessionId": sid}));
    assert_eq!(r["result"], json!({}), "{r}");

    let (replay, _) = load_session(&mut c, "session/load", &sid, &env.project);
    let users: Vec<String> = replay
        .iter()
        .filter(|m| update_kind(m).as_deref() == Some("user_message_chunk"))
        .map(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(
        users,
        ["first", "/rewind 2"],
        "the replay shows the history before prompt 2, then the rewind"
    );
}

#[test]
fn a_fork_goes_on_apart_from_its_parent() {
    let env = Env::new();
    let fake = FakeModel::start([
        call("c1", "write", json!({"path": "a.txt", "content": "one\n"})),
        say("wrote one"),
        call("c2", "write", json!({"path": "a.txt", "content": "two\n"})),
        say("wrote two"),
        say("parent goes on"),
        say("fork goes on"),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({}));
    c.turn(&sid, "first");
    c.turn(&sid, "second");
    let out = command(&mut c, &sid, "/fork 2");
    let fork = out
        .split_whitespace()
        .nth(2)
        .map(|s| s.trim_end_matches(','))
        .unwrap_or_default()
        .to_owned();
    assert!(out.starts_with("Forked as s"), "{out}");

    c.turn(&sid, "parent third");
    let (_, r) = load_session(&mut c, "session/load", &fork, &env.project);
    assert!(r.get("result").is_some(), "{r}");
    while update_kind(&c.next()).as_deref() != Some("available_commands_update") {}
    c.turn(&fork, "fork second");
    let requests = fake.requests();
    assert_eq!(
        user_texts(&requests[4].body),
        ["first", "second", "parent third"]
    );
    assert_eq!(user_texts(&requests[5].body), ["first", "fork second"]);
    // Each has its own prompts and checkpoints: the fork rewinds its copied first prompt.
    assert!(command(&mut c, &fork, "/rewind").contains("2. fork second"));
    let out = command(&mut c, &fork, "/rewind 1 files force");
    assert!(out.contains("Removed (created since):"), "{out}");
    assert!(!env.project.join("a.txt").exists());

    // `oml sessions` shows the fork under its parent.
    let run = env.run(None, &["sessions"]);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let parent_line = lines
        .iter()
        .position(|l| l.starts_with(&sid))
        .expect("parent listed");
    let fork_line = lines
        .iter()
        .position(|l| l.contains(&fork))
        .expect("fork listed");
    assert_eq!(fork_line, parent_line + 1, "{run:?}");
    assert!(lines[fork_line].starts_with("  └ "), "{run:?}");
    assert!(lines[fork_line].contains("fork of prompt 2"), "{run:?}");
}

#[test]
fn the_checkpoint_cap_keeps_a_change_recorded_but_not_restorable() {
    let env = Env::new();
    env.init("(setq checkpoint.max-bytes 10)\n");
    env.file("small.txt", "tiny\n");
    env.file("big.txt", "far more than ten bytes\n");
    let fake = FakeModel::start([
        two_calls(
            (
                "c1",
                "write",
                json!({"path": "small.txt", "content": "changed\n"}),
            ),
            (
                "c2",
                "write",
                json!({"path": "big.txt", "content": "changed\n"}),
            ),
        ),
        say("done"),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({}));
    c.turn(&sid, "change both");
    let out = command(&mut c, &sid, "/rewind 1 files");
    assert!(out.contains("Nothing was rewound."), "{out}");
    assert!(out.contains("big.txt"), "{out}");
    let out = command(&mut c, &sid, "/rewind 1 files force");
    assert_eq!(
        read(&env.project.join("small.txt")).as_deref(),
        Some("tiny\n"),
        "{out}"
    );
    assert_eq!(
        read(&env.project.join("big.txt")).as_deref(),
        Some("changed\n")
    );
    assert!(out.contains("Left as they are"), "{out}");
}

/// `git` in `dir`, which must succeed.
fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[test]
fn what_a_command_changes_in_a_git_work_tree_is_rewound_too() {
    if support::home::landlock_or_skip().is_none() {
        return;
    }
    let env = Env::new();
    env.init("(setq checkpoint.commands? true)\n");
    let p = &env.project;
    env.file("tracked.txt", "committed\n");
    env.file("gone.txt", "to be deleted\n");
    env.file("dirty.txt", "committed dirty\n");
    git(p, &["init", "-q"]);
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "start"]);
    // The user's own uncommitted edit, before the session.
    fs::write(p.join("dirty.txt"), "the user's edit\n").expect("edit");
    let script =
        "echo changed > tracked.txt; echo new > new.txt; rm gone.txt; echo again > dirty.txt";
    let fake = FakeModel::start([call("c1", "bash", json!({"command": script})), say("done")]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({}));
    c.turn(&sid, "change things");
    assert_eq!(read(&p.join("tracked.txt")).as_deref(), Some("changed\n"));
    let list = command(&mut c, &sid, "/rewind");
    assert!(
        list.contains("1. change things  (4 files changed)"),
        "{list}"
    );
    let out = command(&mut c, &sid, "/rewind 1");
    assert_eq!(
        read(&p.join("tracked.txt")).as_deref(),
        Some("committed\n"),
        "{out}"
    );
    assert_eq!(
        read(&p.join("gone.txt")).as_deref(),
        Some("to be deleted\n"),
        "{out}"
    );
    assert_eq!(
        read(&p.join("dirty.txt")).as_deref(),
        Some("the user's edit\n"),
        "{out}"
    );
    assert!(!p.join("new.txt").exists(), "{out}");
}

/// The line of prompt `n` in the list `/rewind` shows.
fn listed(list: &str, n: usize) -> String {
    let start = format!("{n}. ");
    list.lines()
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("no prompt {n} in {list}"))
        .to_owned()
}

/// Issue 43 item 5: what a rewind put back is no prompt's change, nor is what a prompt the
/// rewind dropped changed.
#[test]
fn the_rewind_list_counts_a_change_only_under_the_prompt_that_made_it() {
    let env = Env::new();
    let fake = FakeModel::start([
        call("c1", "write", json!({"path": "a.txt", "content": "one\n"})),
        say("wrote one"),
        say("nothing to do"),
        call("c2", "write", json!({"path": "b.txt", "content": "bee\n"})),
        say("wrote bee"),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({}));
    c.turn(&sid, "one");
    c.turn(&sid, "two");
    command(&mut c, &sid, "/rewind 1 files");
    assert!(!env.project.join("a.txt").exists());
    let list = command(&mut c, &sid, "/rewind");
    assert_eq!(listed(&list, 1), "1. one  (1 file changed)", "{list}");
    assert_eq!(listed(&list, 2), "2. two", "the restore is not prompt 2's");

    c.turn(&sid, "three");
    command(&mut c, &sid, "/rewind 3");
    assert!(!env.project.join("b.txt").exists());
    let list = command(&mut c, &sid, "/rewind");
    assert_eq!(
        listed(&list, 2),
        "2. two",
        "nor is what prompt 3 did: {list}"
    );
    assert!(!list.contains("3. "), "{list}");
}

/// Every line break of `text` (Markdown) shows as one: a line follows a blank line, or is an
/// item of the list the line before it starts or continues.
fn assert_lines_apart(text: &str) {
    let item = |l: &str| {
        l.starts_with("- ")
            || l.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
    };
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert!(
            a.is_empty() || b.is_empty() || (item(a) && item(b)),
            "{a:?} and {b:?} would run together:\n{text}"
        );
    }
}

/// Issue 43 item 14: the list and the report are Markdown whose lines stay apart (Toad
/// renders the answer as Markdown, where a single line break is a space).
#[test]
fn the_rewind_answers_are_markdown_with_their_lines_apart() {
    let env = Env::new();
    env.file("a.txt", "original\n");
    let fake = FakeModel::start([
        two_calls(
            ("c1", "write", json!({"path": "a.txt", "content": "mine\n"})),
            ("c2", "write", json!({"path": "b.txt", "content": "new\n"})),
        ),
        say("done"),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({}));
    c.turn(&sid, "write both");
    let (a, b) = (env.project.join("a.txt"), env.project.join("b.txt"));
    let list = command(&mut c, &sid, "/rewind");
    assert_lines_apart(&list);
    fs::write(&a, "the user's\n").expect("edit");
    let refused = command(&mut c, &sid, "/rewind 1");
    assert!(refused.starts_with("Nothing was rewound.\n\n"), "{refused}");
    assert_lines_apart(&refused);
    let out = command(&mut c, &sid, "/rewind 1 force");
    assert_lines_apart(&out);
    let expected = format!(
        "\n\nRestored:\n\n- `{}`\n\nRemoved (created since):\n\n- `{}`",
        a.display(),
        b.display()
    );
    assert!(out.contains(&expected), "{out}");
}

/// The `entries` of the last `plan` update among `updates`, if any.
fn last_plan(updates: &[Value]) -> Option<Value> {
    updates
        .iter()
        .rfind(|m| update_kind(m).as_deref() == Some("plan"))
        .map(|m| m["params"]["update"]["entries"].clone())
}

/// Issue 43 item 3: a rewind of the conversation takes the plan back to that of the last
/// prompt that remains, live (a `plan` update) and in the replay.
#[test]
fn a_rewind_takes_the_plan_back_live_and_in_the_replay() {
    let env = Env::new();
    let plan = |step: &str| json!({"steps": [{"step": step, "status": "pending"}]});
    let fake = FakeModel::start([
        call("c1", "update_plan", plan("first plan")),
        say("planned"),
        call("c2", "update_plan", plan("second plan")),
        say("planned again"),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let sid = yolo_session(&mut c, &env, json!({}));
    c.turn(&sid, "plan");
    c.turn(&sid, "plan again");
    let content = |p: &Option<Value>| p.as_ref().map(|e| e[0]["content"].clone());

    let (updates, _) = c.turn(&sid, "/rewind 2");
    let live = last_plan(&updates);
    assert_eq!(content(&live), Some(json!("first plan")), "{updates:?}");
    c.call("session/close", json!({"sessionId": sid}));
    let (replay, _) = load_session(&mut c, "session/load", &sid, &env.project);
    assert_eq!(content(&last_plan(&replay)), Some(json!("first plan")));
    while update_kind(&c.next()).as_deref() != Some("available_commands_update") {}

    let (updates, _) = c.turn(&sid, "/rewind 1");
    assert_eq!(
        last_plan(&updates),
        Some(json!([])),
        "no plan before prompt 1"
    );
    c.call("session/close", json!({"sessionId": sid}));
    let (replay, _) = load_session(&mut c, "session/load", &sid, &env.project);
    assert_eq!(last_plan(&replay), None, "nothing to replay: {replay:?}");
}

/// One turn served as an editor that offers `fs` and saves what it is sent: reads and writes
/// go to the disk. The turn's messages, and the params of each `fs/write_text_file`.
fn served_turn(c: &mut Client, sid: &str, text: &str) -> (Vec<Value>, Vec<Value>) {
    let id = c.prompt(sid, text);
    let (mut messages, mut writes) = (Vec::new(), Vec::new());
    loop {
        let m = c.next();
        let path = m["params"]["path"].as_str().unwrap_or_default().to_owned();
        match m["method"].as_str() {
            Some("fs/read_text_file") => match fs::read_to_string(&path) {
                Ok(content) => c.answer(&m["id"], json!({"content": content})),
                Err(_) => c.answer_error(&m["id"], -32002, "Resource not found"),
            },
            Some("fs/write_text_file") => {
                let content = m["params"]["content"].as_str().unwrap_or_default();
                fs::write(&path, content).expect("the editor saves");
                c.answer(&m["id"], json!({}));
                writes.push(m["params"].clone());
            }
            None if m["id"] == json!(id) => return (messages, writes),
            _ => messages.push(m),
        }
    }
}

/// Issue 43 item 4: with an editor that offers `fs`, a rewind puts files back through
/// `fs/write_text_file`, as the edits went, removes on the disk what did not exist before, and
/// shows them all on a card of kind edit with their paths as locations.
#[test]
fn a_rewind_writes_through_the_editor_that_offers_fs_and_shows_the_files() {
    let env = Env::new();
    env.file("a.txt", "original\n");
    let fake = FakeModel::start([
        two_calls(
            ("c1", "write", json!({"path": "a.txt", "content": "mine\n"})),
            ("c2", "write", json!({"path": "b.txt", "content": "new\n"})),
        ),
        say("done"),
    ]);
    let mut c = Client::start(&env, Some(&fake));
    let fs_caps = json!({"fs": {"readTextFile": true, "writeTextFile": true}});
    let sid = yolo_session(&mut c, &env, fs_caps);
    let (a, b) = (env.project.join("a.txt"), env.project.join("b.txt"));
    let (_, writes) = served_turn(&mut c, &sid, "write both");
    assert_eq!(writes.len(), 2, "the edits went through the editor");
    assert_eq!(read(&a).as_deref(), Some("mine\n"));

    let (messages, writes) = served_turn(&mut c, &sid, "/rewind 1");
    let (a_path, b_path) = (a.display().to_string(), b.display().to_string());
    assert_eq!(
        writes,
        [json!({"sessionId": sid, "path": a_path, "content": "original\n"})],
        "{messages:?}"
    );
    assert_eq!(read(&a).as_deref(), Some("original\n"));
    assert!(!b.exists(), "a file created since is removed on the disk");
    let card = messages
        .iter()
        .find(|m| update_kind(m).as_deref() == Some("tool_call"))
        .map(|m| &m["params"]["update"])
        .expect("a card for the rewound files");
    assert_eq!(card["kind"], "edit", "{card}");
    assert_eq!(
        card["locations"],
        json!([{"path": a_path}, {"path": b_path}]),
        "{card}"
    );
    let text = texts(&messages);
    assert!(text.contains(&a_path) && text.contains(&b_path), "{text}");
}
