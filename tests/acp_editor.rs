//! What an editor shows of `oml acp`, end to end (issue #26): the real binary driven over pipes
//! by the scripted editor of `support::editor`, against the fake model server, with fresh XDG
//! and HOME directories per test. Each test is one thing a user sees: the diff a permission
//! question shows against what is written, a card's status while it is asked about, what a
//! `session/load` replays (edit cards, the plan), and the token counts after a resume or a
//! cancel.

mod support;

use serde_json::{Value, json};
use support::editor::{Editor, WAIT, chunks, update};
use support::fake_model::{
    FakeModel, Reply, Step, delta_chunk, text_chunks, tool_call_chunks, usage_chunk,
};
use support::home::Env;

/// The client capabilities of an editor that serves its buffers (agent-shell, Zed).
fn fs_capabilities() -> Value {
    json!({"fs": {"readTextFile": true, "writeTextFile": true}})
}

/// `oml acp` in `env` against `fake`, initialised with `capabilities`, and one new session in
/// the project; the editor and the session id.
fn session(env: &Env, fake: &FakeModel, capabilities: Value) -> (Editor, String) {
    let mut ed = start(env, fake, capabilities);
    let (sid, _) = ed.new_session_with(&env.project, json!([]));
    (ed, sid)
}

/// `oml acp` in `env` against `fake`, initialised with `capabilities`.
fn start(env: &Env, fake: &FakeModel, capabilities: Value) -> Editor {
    let mut ed = Editor::spawn(env.command(Some(fake), &["acp"]));
    let r = ed.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
    );
    assert!(r.get("result").is_some(), "{r}");
    ed
}

/// One model call that calls `tool` with the JSON arguments `args` and reports `prompt` and
/// `completion` tokens.
fn tool_call(id: &str, tool: &str, args: &Value, prompt: u64, completion: u64) -> Reply {
    let mut steps = tool_call_chunks(id, tool, &[&args.to_string()]);
    steps.push(usage_chunk(prompt, completion));
    Reply::from(steps)
}

/// One model call that answers `text`.
fn answer(text: &str) -> Reply {
    Reply::from(text_chunks(&[text]))
}

/// What the scripted editor saw of one turn it served.
#[derive(Default)]
struct Served {
    /// Every message before the prompt's answer (the agent's requests included).
    messages: Vec<Value>,
    /// The prompt's answer.
    answer: Value,
    /// The `toolCall` of each `session/request_permission`.
    asked: Vec<Value>,
    /// The `content` of each `fs/write_text_file`.
    written: Vec<String>,
}

/// Serve the prompt `id` to its answer as an editor with unsaved buffers: `fs/read_text_file`
/// gets `buffer(path)`, each permission question is allowed once, each write is accepted.
fn serve(ed: &mut Editor, id: u64, buffer: impl Fn(&str) -> String) -> Served {
    let mut served = Served::default();
    loop {
        let m = ed.next();
        match m["method"].as_str() {
            Some("fs/read_text_file") => {
                let path = m["params"]["path"].as_str().unwrap_or_default();
                ed.answer(&m["id"], json!({"content": buffer(path)}));
            }
            Some("fs/write_text_file") => {
                let content = m["params"]["content"].as_str().unwrap_or_default();
                served.written.push(content.to_owned());
                ed.answer(&m["id"], json!({}));
            }
            Some("session/request_permission") => {
                served.asked.push(m["params"]["toolCall"].clone());
                ed.answer(
                    &m["id"],
                    json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
                );
            }
            None if m["id"] == json!(id) => {
                served.answer = m;
                return served;
            }
            _ => {}
        }
        served.messages.push(m);
    }
}

/// The `session/update` payloads among `messages` of the kind `kind`.
fn updates<'a>(messages: &'a [Value], kind: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| update(m) == kind)
        .map(|m| &m["params"]["update"])
        .collect()
}

/// Item 1: with an editor that serves its buffers, the question's diff starts from the buffer
/// (its unsaved first line included), and what is written is that buffer with the edit.
#[test]
fn the_permission_diff_starts_from_the_editors_buffer_as_the_write_does() {
    let env = Env::new();
    let disk = "def sub(a, b):\n    return a - b\n";
    let path = env.file("calc.py", disk);
    let edit = json!({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"});
    let fake = FakeModel::start([tool_call("call_1", "edit", &edit, 10, 1), answer("Done.")]);
    let (mut ed, sid) = session(&env, &fake, fs_capabilities());
    let buffer = format!("# unsaved\n{disk}");
    let id = ed.prompt(&sid, "make it add");
    let served = serve(&mut ed, id, |_| buffer.clone());

    assert_eq!(served.asked.len(), 1, "one question");
    let diff = &served.asked[0]["content"][0];
    assert_eq!(diff["type"], "diff", "{diff}");
    assert_eq!(diff["path"], path.display().to_string());
    assert_eq!(diff["oldText"], buffer, "the question shows the buffer");
    let edited = buffer.replace("a - b", "a + b");
    assert_eq!(diff["newText"], edited);
    assert_eq!(
        served.written,
        [edited],
        "what is written is what was shown"
    );
}

/// A write through the editor past `acp.diff-max-bytes`: the question names its size, the
/// editor gets the whole content, and the finished card has no diff (as the write tool's own
/// result has none past 4 MiB), only "Wrote N bytes"; one under the cap keeps its diff.
#[test]
fn a_write_through_the_editor_past_the_diff_cap_ends_without_a_diff() {
    let env = Env::new();
    env.init("(setq acp.diff-max-bytes 50)");
    let long = "0123456789".repeat(8);
    let big = json!({"path": "big.txt", "content": &long});
    let small = json!({"path": "small.txt", "content": "x"});
    let fake = FakeModel::start([
        tool_call("call_1", "write", &big, 10, 1),
        tool_call("call_2", "write", &small, 10, 1),
        answer("Done."),
    ]);
    let (mut ed, sid) = session(&env, &fake, fs_capabilities());
    let id = ed.prompt(&sid, "write both");
    let served = serve(&mut ed, id, |_| String::new());
    assert_eq!(
        served.written,
        [long.as_str(), "x"],
        "the editor wrote both whole"
    );
    assert_eq!(served.asked[0]["content"][0]["type"], "content");
    assert_eq!(served.asked[1]["content"][0]["type"], "diff");
    let ends: Vec<&Value> = updates(&served.messages, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed")
        .collect();
    let kinds = |u: &Value| -> Vec<String> {
        let content = u["content"].as_array().cloned().unwrap_or_default();
        content
            .iter()
            .map(|c| c["type"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(kinds(ends[0]), ["content"], "{}", ends[0]);
    assert_eq!(
        ends[0]["content"][0]["content"]["text"],
        format!(
            "Wrote 80 bytes to {}",
            env.project.join("big.txt").display()
        )
    );
    assert_eq!(kinds(ends[1]), ["content", "diff"], "{}", ends[1]);
}

/// Item 7: a card whose permission is asked is pending from its first `tool_call` until it is
/// allowed, then in progress; a tool that needs no permission starts in progress.
#[test]
fn a_card_is_pending_from_its_first_update_while_its_permission_is_asked() {
    let env = Env::new();
    env.file("notes.txt", "hello\n");
    let fake = FakeModel::start([
        tool_call("call_1", "read", &json!({"path": "notes.txt"}), 10, 1),
        tool_call(
            "call_2",
            "write",
            &json!({"path": "out.txt", "content": "hi\n"}),
            10,
            1,
        ),
        answer("Done."),
    ]);
    let (mut ed, sid) = session(&env, &fake, json!({}));
    let id = ed.prompt(&sid, "copy it");
    let served = serve(&mut ed, id, |_| String::new());

    // The statuses of call_2's card as the editor saw them, the question included.
    let mut write = Vec::new();
    for m in &served.messages {
        let u = &m["params"]["update"];
        if m["method"] == "session/request_permission" {
            write.push(format!("asked {}", m["params"]["toolCall"]["status"]));
        } else if u["toolCallId"] == "call_2" && u["status"].is_string() {
            let kind = u["sessionUpdate"].as_str().unwrap_or_default();
            write.push(format!("{kind} {}", u["status"]));
        }
    }
    assert_eq!(
        write,
        [
            r#"tool_call "pending""#,
            r#"asked "pending""#,
            r#"tool_call_update "in_progress""#,
            r#"tool_call_update "completed""#,
        ]
    );
    let read = updates(&served.messages, "tool_call");
    assert_eq!(read[0]["toolCallId"], "call_1");
    assert_eq!(
        read[0]["status"], "in_progress",
        "a read is not asked about"
    );
}

/// `session/load` of `sid` in a new `oml acp`; the replayed updates.
fn load(env: &Env, fake: &FakeModel, sid: &str) -> (Editor, Vec<Value>) {
    let mut ed = start(env, fake, json!({}));
    let id = ed.request(
        "session/load",
        json!({"sessionId": sid, "cwd": env.project.display().to_string(), "mcpServers": []}),
    );
    let (replay, r) = ed.until_response(id);
    assert!(r.get("result").is_some(), "{r}");
    (ed, replay)
}

/// The finished `tool_call_update` of each card among `messages`, by tool call id.
fn finished(messages: &[Value]) -> Vec<(String, Value)> {
    updates(messages, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed" || u["status"] == "failed")
        .map(|u| {
            (
                u["toolCallId"].as_str().unwrap_or("").to_owned(),
                u["content"].clone(),
            )
        })
        .collect()
}

/// Item 2: a replayed edit or write card has the content the live one had: the text's first
/// line ("Edited path"), then the diff, not the whole hunk as text above the diff.
#[test]
fn a_replayed_edit_card_shows_what_the_live_card_showed() {
    let env = Env::new();
    env.init("(setq agent.permission-mode :yolo)\n");
    env.file("calc.py", "def sub(a, b):\n    return a - b\n");
    let edit = json!({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"});
    let write = json!({"path": "new.txt", "content": "one\ntwo\n"});
    let fake = FakeModel::start([
        tool_call("call_1", "edit", &edit, 10, 1),
        tool_call("call_2", "write", &write, 10, 1),
        answer("Done."),
    ]);
    let (mut ed, sid) = session(&env, &fake, json!({}));
    let id = ed.prompt(&sid, "change things");
    let live = finished(&serve(&mut ed, id, |_| String::new()).messages);
    drop(ed);
    assert_eq!(live.len(), 2, "{live:?}");
    assert_eq!(live[0].1[1]["type"], "diff", "{:?}", live[0]);

    let (_ed, replay) = load(&env, &fake, &sid);
    assert_eq!(finished(&replay), live);
}

/// Item 3: `session/load` replays the session's latest plan, once, after its history.
#[test]
fn a_loaded_session_replays_its_latest_plan() {
    let env = Env::new();
    let first = json!({"plan": [{"step": "Read", "status": "in_progress"},
                                {"step": "Fix", "status": "pending"}]});
    let second = json!({"plan": [{"step": "Read", "status": "completed"},
                                 {"step": "Fix", "status": "in_progress"}]});
    let fake = FakeModel::start([
        tool_call("call_1", "update_plan", &first, 10, 1),
        tool_call("call_2", "update_plan", &second, 10, 1),
        answer("Working on it."),
    ]);
    let (mut ed, sid) = session(&env, &fake, json!({}));
    let id = ed.prompt(&sid, "plan it");
    let served = serve(&mut ed, id, |_| String::new());
    let live: Vec<Value> = updates(&served.messages, "plan")
        .into_iter()
        .cloned()
        .collect();
    assert_eq!(live.len(), 2);
    drop(ed);

    let (_ed, replay) = load(&env, &fake, &sid);
    let plans: Vec<Value> = updates(&replay, "plan").into_iter().cloned().collect();
    assert_eq!(plans, [live[1].clone()], "the latest plan, once");
    assert_eq!(update(replay.last().unwrap()), "plan", "after the history");
}

/// The text `/usage` shows in the session `sid`.
fn usage_text(ed: &mut Editor, sid: &str) -> String {
    let id = ed.prompt(sid, "/usage");
    let (before, _) = ed.until_response(id);
    chunks(&before)
}

/// Item 9: after a resume in a new process, `/usage` counts the calls of the whole session.
#[test]
fn usage_after_a_resume_counts_the_whole_session() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::from(vec![
            Step::Chunk(support::fake_model::delta_chunk(
                json!({"content": "One."}),
                Some("stop"),
            )),
            usage_chunk(100, 20),
        ]),
        Reply::from(vec![
            Step::Chunk(support::fake_model::delta_chunk(
                json!({"content": "Two."}),
                Some("stop"),
            )),
            usage_chunk(50, 5),
        ]),
    ]);
    let (mut ed, sid) = session(&env, &fake, json!({}));
    let (_, reason) = ed.turn(&sid, "first");
    assert_eq!(reason, "end_turn");
    drop(ed);

    let mut ed = start(&env, &fake, json!({}));
    let r = ed.call(
        "session/resume",
        json!({"sessionId": sid, "cwd": env.project.display().to_string(), "mcpServers": []}),
    );
    assert!(r.get("result").is_some(), "{r}");
    ed.until(|m| update(m) == "available_commands_update");
    assert_eq!(
        usage_text(&mut ed, &sid),
        "1 model calls, 100 prompt tokens, 20 completion tokens"
    );
    let (_, reason) = ed.turn(&sid, "second");
    assert_eq!(reason, "end_turn");
    assert_eq!(
        usage_text(&mut ed, &sid),
        "2 model calls, 150 prompt tokens, 25 completion tokens"
    );
}

/// Item 9: a turn cancelled while it compacts the transcript (a model call of its own, which
/// fails with the cancel) answers `cancelled` with, in `_meta.oml.usage`, the call it made.
#[test]
fn a_turn_cancelled_while_compacting_reports_the_call_it_made() {
    let env = Env::new();
    // A window so small that the second prompt compacts the first turn first.
    env.init("(setq llm.context-window 100)\n");
    let long = "words ".repeat(100);
    let fake = FakeModel::start([
        Reply::from(vec![
            Step::Chunk(delta_chunk(json!({"content": long}), Some("stop"))),
            usage_chunk(30, 3),
        ]),
        Reply::from(vec![Step::Hang]),
    ]);
    let (mut ed, sid) = session(&env, &fake, json!({}));
    let (_, reason) = ed.turn(&sid, "first");
    assert_eq!(reason, "end_turn");
    let id = ed.prompt(&sid, "second");
    fake.wait_for_requests(2, WAIT);
    ed.notify("session/cancel", json!({"sessionId": sid}));
    let (_, r) = ed.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    assert_eq!(
        r["result"]["_meta"]["oml"]["usage"],
        json!({"calls": 1, "prompt_tokens": 0, "completion_tokens": 0}),
        "{r}"
    );
}

/// Item 5: a command run in the editor's terminal (a pty, as Toad's is) reaches the model as
/// the terminal showed it: `\r\n` line ends and carriage-return progress lines applied.
#[test]
fn output_from_the_editors_terminal_reaches_the_model_as_the_terminal_showed_it() {
    let env = Env::new();
    let args = json!({"command": "./build"});
    let fake = FakeModel::start([tool_call("call_1", "bash", &args, 10, 1), answer("Done.")]);
    let (mut ed, sid) = session(&env, &fake, json!({"terminal": true}));
    ed.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    let id = ed.prompt(&sid, "build it");
    loop {
        let m = ed.next();
        match m["method"].as_str() {
            Some("terminal/create") => ed.answer(&m["id"], json!({"terminalId": "t1"})),
            Some("terminal/wait_for_exit") => ed.answer(&m["id"], json!({"exitCode": 0})),
            Some("terminal/output") => ed.answer(
                &m["id"],
                json!({"output": "early\r\n10%\r55%\r100%\r\nlate\r\n", "truncated": false}),
            ),
            Some("terminal/release") | Some("terminal/kill") => ed.answer(&m["id"], json!({})),
            None if m["id"] == json!(id) => break,
            _ => {}
        }
    }
    let requests = fake.requests();
    let result = requests[1].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"].clone())
        .unwrap_or_default();
    assert_eq!(result, json!("early\n100%\nlate"));
}

/// Item 14: the model's stream dies mid-answer. The text the editor already showed is in the
/// session: `session/load` replays it, and the next prompt sends it to the model marked as cut
/// off, every tool call of the turn still with its result.
#[test]
fn an_answer_cut_off_mid_stream_is_kept_replayed_and_marked() {
    let env = Env::new();
    env.file("notes.txt", "some notes\n");
    let read = json!({"path": "notes.txt"});
    let mut broken = text_chunks(&["Half an answer about the notes"]);
    broken.insert(1, Step::Drop);
    let fake = FakeModel::start([
        tool_call("call_1", "read", &read, 10, 1),
        Reply::from(broken),
        answer("Done."),
    ]);
    let (mut ed, sid) = session(&env, &fake, json!({}));
    let id = ed.prompt(&sid, "read the notes");
    let served = serve(&mut ed, id, |_| String::new());
    assert!(
        chunks(&served.messages).contains("Half an answer about the notes"),
        "{:?}",
        served.messages
    );
    drop(ed);

    let (mut ed, replay) = load(&env, &fake, &sid);
    let replayed = chunks(&replay);
    assert!(
        replayed.contains("Half an answer about the notes"),
        "{replay:?}"
    );
    let (_, reason) = ed.turn(&sid, "go on");
    assert_eq!(reason, "end_turn");
    let requests = fake.requests();
    let messages = requests[2].body["messages"].as_array().unwrap().clone();
    let cut = messages
        .iter()
        .find(|m| {
            m["role"] == "assistant"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("Half an answer about the notes"))
        })
        .unwrap_or_else(|| panic!("the cut-off answer is sent: {messages:?}"));
    assert!(
        cut["content"].as_str().unwrap().contains("cut off"),
        "marked as cut off: {cut}"
    );
    for call in messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
    {
        let id = &call["id"];
        assert!(
            messages
                .iter()
                .any(|m| m["role"] == "tool" && &m["tool_call_id"] == id),
            "tool call {id} has its result: {messages:?}"
        );
    }
}

/// Item 13: `read` of a FIFO that nobody writes does not hold the turn: the tool refuses it at
/// once, and a cancel then ends the turn.
#[test]
fn reading_a_fifo_does_not_hold_the_turn_past_a_cancel() {
    let env = Env::new();
    let fifo = env.project.join("pipe");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let read = json!({"path": "pipe"});
    let fake = FakeModel::start([
        tool_call("call_1", "read", &read, 10, 1),
        Reply::from(vec![Step::Hang]),
    ]);
    let (mut ed, sid) = session(&env, &fake, json!({}));
    let id = ed.prompt(&sid, "read the pipe");
    let done = ed
        .until(|m| update(m) == "tool_call_update" && m["params"]["update"]["status"] == "failed");
    let text = done["params"]["update"].to_string();
    assert!(text.contains("not a regular file"), "{text}");
    fake.wait_for_requests(2, WAIT);
    ed.notify("session/cancel", json!({"sessionId": sid}));
    let (_, answer) = ed.until_response(id);
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
}

/// The rows of the permission modes table in docs/src/editors.md: `[id, name, description]`.
fn documented_modes() -> Vec<[String; 3]> {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/editors.md"),
    )
    .unwrap();
    let begin = page.find("<!-- modes:begin").expect("a modes:begin marker");
    let end = page.find("<!-- modes:end -->").expect("a modes:end marker");
    page[begin..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|row| {
            let cells: Vec<String> = row
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().trim_matches('`').to_owned())
                .collect();
            [cells[0].clone(), cells[1].clone(), cells[2].clone()]
        })
        .collect()
}

/// Issue #26 item 10: the modes an editor is offered, as ACP modes and as the `mode` config
/// option, say what each does, and say what docs/src/editors.md says: accept-edits runs edits
/// inside the workspace and confined commands, not "bash asks".
#[test]
fn the_modes_offered_say_what_they_do_as_the_docs_do() {
    let env = Env::new();
    let fake = FakeModel::start([answer("unused")]);
    let mut ed = start(&env, &fake, json!({}));
    let r = ed.call(
        "session/new",
        json!({"cwd": env.project.display().to_string(), "mcpServers": []}),
    );
    let row = |m: &Value, id: &str| {
        [m[id].clone(), m["name"].clone(), m["description"].clone()]
            .map(|v| v.as_str().unwrap_or_default().to_owned())
    };
    let offered: Vec<[String; 3]> = r["result"]["modes"]["availableModes"]
        .as_array()
        .expect("availableModes")
        .iter()
        .map(|m| row(m, "id"))
        .collect();
    assert_eq!(offered, documented_modes(), "{r}");
    let option = r["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "mode")
        .expect("the mode config option");
    let choices: Vec<[String; 3]> = option["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| row(m, "value"))
        .collect();
    assert_eq!(choices, offered);
    let accept = &offered[1][2];
    assert!(
        accept.contains("confines") && !accept.contains("bash asks"),
        "{accept}"
    );
}
