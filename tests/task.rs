//! The `task` tool end to end: the real `oml` in print mode and as `oml acp` against the fake
//! model, running sub-agents as sessions of the same process — in parallel, with their tools
//! held to their definition, nested no deeper than `agent.max-depth`, in the background (at
//! most `agent.max-background`, stopped with their session and with oml), and cancelled with
//! their parent; a worktree task outside git is a clear error.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::editor::Editor;
use support::fake_model::{FakeModel, Reply, Step, text_chunks, tool_call_chunks};
use support::home::Env;
use support::model::user_texts;

fn task(id: &str, args: Value) -> Reply {
    Reply::from(tool_call_chunks(id, "task", &[&args.to_string()]))
}

/// Several tool calls in one answer.
fn calls(calls: &[(&str, &str, Value)]) -> Reply {
    let mut steps = Vec::new();
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let delta = json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                            "function": {"name": name, "arguments": args.to_string()}}]});
        steps.push(Step::Chunk(support::fake_model::delta_chunk(delta, None)));
    }
    steps.push(Step::Chunk(support::fake_model::delta_chunk(
        json!({}),
        Some("tool_calls"),
    )));
    Reply::from(steps)
}

/// A final answer that takes `ms` to stream.
fn slow_text(ms: u64, text: &str) -> Reply {
    let mut steps = vec![Step::Sleep(ms)];
    steps.extend(text_chunks(&[text]));
    Reply::from(steps)
}

/// How long each sub-agent's answer takes in the parallel test: long enough that a load spike
/// cannot make one run after the other look like overlap, or the reverse.
const CHILD_ANSWER_MS: u64 = 2000;

/// How long the answers take that a parent's last model call and its background sub-agent race
/// for: both calls start as the `task` call returns, and both must have started before either
/// answer ends, however loaded the machine.
const RACE_ANSWER_MS: u64 = 1000;

fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "tool")
                .filter_map(|m| m["content"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn system_prompt(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn two_task_calls_of_one_answer_run_at_the_same_time_and_each_answer_comes_back() {
    let env = Env::new();
    let fake = FakeModel::start([
        calls(&[
            (
                "call_a",
                "task",
                json!({"agent": "explore", "prompt": "find the alpha", "description": "alpha"}),
            ),
            (
                "call_b",
                "task",
                json!({"agent": "explore", "prompt": "find the beta", "description": "beta"}),
            ),
        ]),
        slow_text(CHILD_ANSWER_MS, "Found it."),
        slow_text(CHILD_ANSWER_MS, "Found it."),
        Reply::from(text_chunks(&["Both found."])),
    ]);
    let out = env.run(Some(&fake), &["-p", "find both"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("Both found."), "{out:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    // The sub-agents' requests both arrived before either answer could end: run one after the
    // other, the second could not start before the first's answer, CHILD_ANSWER_MS long.
    let gap = requests[2].arrived.duration_since(requests[1].arrived);
    assert!(
        gap < Duration::from_millis(CHILD_ANSWER_MS),
        "the second sub-agent waited {gap:?}"
    );
    // Each sub-agent was an explore agent: its own prompt, its read-only tools, its task.
    for r in &requests[1..3] {
        assert!(system_prompt(&r.body).contains("read-only search sub-agent"));
        let mut names = tool_names(&r.body);
        names.sort();
        assert_eq!(names, ["find", "grep", "ls", "read"], "{names:?}");
    }
    let asked: Vec<String> = requests[1..3]
        .iter()
        .map(|r| {
            r.body["messages"][1]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert!(asked.contains(&"find the alpha".to_owned()), "{asked:?}");
    assert!(asked.contains(&"find the beta".to_owned()), "{asked:?}");
    // The parent read both results, in the order of its calls.
    let results = tool_results(&requests[3].body);
    assert_eq!(results.len(), 2, "{results:?}");
    for r in &results {
        assert!(
            r.starts_with("Found it.\n\n[explore stopped: end-turn]"),
            "{r}"
        );
    }
}

#[test]
fn a_task_too_deep_is_an_error_the_model_reads_and_an_unknown_agent_names_the_known_ones() {
    let env = Env::new();
    env.init("(setq agent.max-depth 1)\n");
    let fake = FakeModel::start([
        task(
            "call_1",
            json!({"agent": "general-purpose", "prompt": "go deeper"}),
        ),
        // The sub-agent (depth 1) tries a task of its own.
        task(
            "call_2",
            json!({"agent": "explore", "prompt": "deeper still"}),
        ),
        Reply::from(text_chunks(&["I stayed."])),
        task("call_3", json!({"agent": "nobody", "prompt": "x"})),
        Reply::from(text_chunks(&["Done."])),
    ]);
    let out = env.run(Some(&fake), &["-p", "nest"]);
    assert_eq!(out.code, 0, "{out:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 5, "{requests:#?}");
    let deep = tool_results(&requests[2].body);
    assert!(
        deep[0].starts_with("Sub-agents nest at most 1 deep (agent.max-depth)"),
        "{deep:?}"
    );
    let first = tool_results(&requests[3].body);
    assert!(first[0].starts_with("I stayed."), "{first:?}");
    let unknown = tool_results(&requests[4].body);
    assert!(
        unknown[1].starts_with("Unknown agent nobody; the agents are: ")
            && unknown[1].contains("explore")
            && unknown[1].contains("general-purpose"),
        "{unknown:?}"
    );
}

#[test]
fn the_editor_sees_a_task_card_with_the_sub_agent_s_progress_and_its_session_in_meta() {
    let env = Env::new();
    let file = env.file("notes.txt", "alpha\n");
    let fake = FakeModel::start([
        task(
            "call_t",
            json!({"agent": "explore", "prompt": "read the notes", "description": "notes"}),
        ),
        Reply::from(tool_call_chunks(
            "sub_1",
            "read",
            &[&json!({"path": file}).to_string()],
        )),
        Reply::from(text_chunks(&["The notes say alpha."])),
        Reply::from(text_chunks(&["Done."])),
    ]);
    let mut ed = Editor::spawn(env.command(Some(&fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session_with(&env.project, json!([]));
    let (updates, reason) = ed.turn(&sid, "look");
    assert_eq!(reason, "end_turn");
    let of_card: Vec<&Value> = updates
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["toolCallId"] == "call_t")
        .collect();
    assert_eq!(of_card[0]["sessionUpdate"], "tool_call", "{of_card:#?}");
    assert_eq!(of_card[0]["title"], "explore: notes");
    let progress: Vec<String> = of_card
        .iter()
        .filter_map(|u| {
            u["content"][0]["content"]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert!(
        progress
            .iter()
            .any(|t| t.contains("**explore**: read the notes") && t.contains("Read ")),
        "{progress:#?}"
    );
    let last = of_card.last().expect("the card's end");
    assert_eq!(last["status"], "completed", "{last}");
    let link = &last["_meta"]["oml"]["subagent"];
    assert_eq!(link["parentSessionId"], sid.as_str(), "{last}");
    assert_eq!(link["agent"], "explore");
    assert!(
        link["sessionId"].as_str().is_some_and(|s| s != sid),
        "{last}"
    );
    // Nothing of the sub-agent's own cards reached the editor as cards of the parent.
    assert!(
        !updates
            .iter()
            .any(|m| m["params"]["update"]["toolCallId"] == "sub_1"),
        "the sub-agent's read leaked as a card"
    );
    // The session picker lists the parent only; the sub-agent's transcript is stored, linked.
    let listed = ed.call("session/list", json!({}));
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["sessionId"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, [sid.as_str()], "{listed}");
    let child = link["sessionId"].as_str().unwrap_or_default();
    let stored = std::fs::read_dir(env.home.state.join("oml/sessions"))
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with(child))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .unwrap_or_default();
    let second: Value =
        serde_json::from_str(stored.lines().nth(1).unwrap_or("null")).expect("json");
    assert_eq!(second["kind"], "subagent-of", "{stored}");
    assert_eq!(second["data"]["session"], sid.as_str(), "{stored}");
    assert!(stored.contains("The notes say alpha."), "{stored}");
}

#[test]
fn a_sub_agent_s_question_reaches_the_editor_on_the_task_card_naming_the_sub_agent() {
    let env = Env::new();
    let fake = FakeModel::start([
        task(
            "call_t",
            json!({"agent": "general-purpose", "prompt": "make the file"}),
        ),
        Reply::from(tool_call_chunks(
            "sub_1",
            "bash",
            &[&json!({"command": "echo made > made.txt"}).to_string()],
        )),
        Reply::from(text_chunks(&["Made it."])),
        Reply::from(text_chunks(&["Done."])),
    ]);
    let mut ed = Editor::spawn(env.command(Some(&fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session_with(&env.project, json!([]));
    let id = ed.prompt(&sid, "make it");
    let ask = ed.until(|m| m["method"] == "session/request_permission");
    let params = &ask["params"];
    assert_eq!(params["sessionId"], sid.as_str(), "{ask}");
    assert_eq!(params["toolCall"]["toolCallId"], "call_t", "{ask}");
    let title = params["toolCall"]["title"].as_str().unwrap_or_default();
    assert!(title.starts_with("general-purpose: "), "{title}");
    ed.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    let (_, answer) = ed.until_response(id);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let made = std::fs::read_to_string(env.project.join("made.txt")).unwrap_or_default();
    assert_eq!(made, "made\n");
    let results = tool_results(&fake.requests()[3].body);
    assert!(results[0].starts_with("Made it."), "{results:?}");
}

#[test]
fn cancelling_the_parent_cancels_its_sub_agents_and_leaves_nothing_running() {
    let env = Env::new();
    env.init("(setq agent.permission-mode :yolo)\n");
    let pid_file = env.root.join("sleep.pid");
    let command = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let fake = FakeModel::start([
        calls(&[
            (
                "call_a",
                "task",
                json!({"agent": "general-purpose", "prompt": "wait"}),
            ),
            (
                "call_b",
                "task",
                json!({"agent": "general-purpose", "prompt": "hang"}),
            ),
        ]),
        Reply::from(tool_call_chunks(
            "sub_1",
            "bash",
            &[&json!({"command": command}).to_string()],
        )),
        Reply::from(vec![Step::Hang]),
    ]);
    let mut ed = Editor::spawn(env.command(Some(&fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session_with(&env.project, json!([]));
    let id = ed.prompt(&sid, "go");
    let pid = support::home::wait_for_pid(&pid_file);
    fake.wait_for_requests(3, Duration::from_secs(20));
    ed.notify("session/cancel", json!({"sessionId": sid}));
    let (_, answer) = ed.until_response(id);
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert!(
        support::home::poll_until(Duration::from_secs(20), || !support::home::process_runs(
            pid
        )),
        "the sub-agent's command {pid} outlived the cancel"
    );
    // The session takes a new prompt at once: nothing of the cancelled turn holds it.
    fake.push(Reply::from(text_chunks(&["Back."])));
    let (_, reason) = ed.turn(&sid, "again");
    assert_eq!(reason, "end_turn");
}

/// The user message holding what was posted to the session (a background task's result) in
/// `body`'s transcript, if any.
fn posted(body: &Value) -> Option<String> {
    body["messages"].as_array().and_then(|m| {
        m.iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .find(|c| c.starts_with("[Background task "))
            .map(str::to_owned)
    })
}

#[test]
fn print_mode_waits_for_a_background_sub_agent_and_runs_the_turn_it_wakes() {
    let env = Env::new();
    let fake = FakeModel::start([
        task(
            "call_bg",
            json!({"agent": "explore", "prompt": "look slowly", "background": true}),
        ),
        // The parent's next call and the sub-agent's first race for these two; both work.
        slow_text(RACE_ANSWER_MS, "Working."),
        slow_text(RACE_ANSWER_MS, "Working."),
        Reply::from(text_chunks(&["The background look is in."])),
    ]);
    let out = env.run(Some(&fake), &["-p", "look in the background"]);
    assert_eq!(out.code, 0, "{out:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    let started = tool_results(&requests[1].body)
        .into_iter()
        .chain(tool_results(&requests[2].body))
        .find(|r| r.starts_with("Started background task task-1 (explore)"));
    assert!(started.is_some(), "{requests:#?}");
    // The turn the result woke: it is in its request, as a user message.
    let woke = posted(&requests[3].body).unwrap_or_default();
    assert!(
        woke.starts_with("[Background task task-1 (explore) has finished]\nWorking."),
        "{woke}"
    );
    assert!(out.stdout.contains("The background look is in."), "{out:?}");
}

#[test]
fn a_background_command_is_read_waited_for_and_stopped() {
    let env = Env::new();
    let pid_file = env.root.join("server.pid");
    let server = format!("echo up; echo $$ > {}; exec sleep 60", pid_file.display());
    let fake = FakeModel::start([
        calls(&[
            ("c1", "bash", json!({"command": server, "background": true})),
            (
                "c2",
                "bash",
                json!({"command": "sleep 0.2; echo built", "background": true}),
            ),
        ]),
        calls(&[
            ("c3", "task_output", json!({"id": "task-2", "wait": true})),
            ("c4", "task_stop", json!({"id": "task-1"})),
            ("c5", "task_output", json!({"id": "task-1", "wait": true})),
        ]),
        Reply::from(text_chunks(&["Both seen."])),
    ]);
    let out = env.run(Some(&fake), &["-p", "start the server and build"]);
    assert_eq!(out.code, 0, "{out:?}");
    let requests = fake.requests();
    let first = tool_results(&requests[1].body);
    assert!(
        first[0].starts_with("Started task-1 in the background"),
        "{first:?}"
    );
    assert!(
        first[1].starts_with("Started task-2 in the background"),
        "{first:?}"
    );
    let second = tool_results(&requests[2].body);
    assert!(
        second[2].starts_with("$ sleep 0.2; echo built\nbuilt"),
        "{second:?}"
    );
    assert!(second[3].starts_with("Stopping task-1"), "{second:?}");
    assert!(
        second[4].starts_with("$ echo up;") && second[4].contains("up\n"),
        "{second:?}"
    );
    let pid = support::home::wait_for_pid(&pid_file);
    assert!(
        support::home::poll_until(Duration::from_secs(20), || !support::home::process_runs(
            pid
        )),
        "the stopped server {pid} still runs"
    );
    // Both ended during the turn: their results joined it, and nothing was left to wake for.
    assert_eq!(requests.len(), 3, "{requests:#?}");
}

#[test]
fn over_acp_v1_a_background_task_ending_after_the_turn_completes_its_card_and_reaches_the_next_prompt()
 {
    let env = Env::new();
    let fake = FakeModel::start([
        task(
            "call_bg",
            json!({"agent": "explore", "prompt": "look slowly", "background": true}),
        ),
        slow_text(RACE_ANSWER_MS, "Found it late."),
    ]);
    let mut ed = Editor::spawn(env.command(Some(&fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session_with(&env.project, json!([]));
    // The parent's next call and the sub-agent's race for the last two replies: usually the
    // sub-agent's answer comes after the parent's turn has ended.
    fake.push(slow_text(RACE_ANSWER_MS, "Found it late."));
    let (updates, reason) = ed.turn(&sid, "look in the background");
    assert_eq!(reason, "end_turn");
    let opened = updates
        .iter()
        .find(|m| m["params"]["update"]["toolCallId"] == "call_bg:background");
    assert!(opened.is_some(), "no background card: {updates:#?}");
    // The card completes with the result (between turns, unless the race below ended it
    // during the turn).
    let completed = |m: &Value| {
        m["params"]["update"]["toolCallId"] == "call_bg:background"
            && m["params"]["update"]["status"] == "completed"
    };
    let done = match updates.iter().find(|m| completed(m)) {
        Some(m) => m.clone(),
        None => ed.until(completed),
    };
    let text = done["params"]["update"]["content"].to_string();
    assert!(text.contains("Found it late."), "{done}");
    // The next prompt gives it to the model, before the prompt itself.
    fake.push(Reply::from(text_chunks(&["Noted."])));
    let (_, reason) = ed.turn(&sid, "what did it find?");
    assert_eq!(reason, "end_turn");
    let last = fake.requests().last().expect("a request").body.clone();
    let messages = last["messages"].as_array().cloned().unwrap_or_default();
    let n = messages.len();
    let result = posted(&last).unwrap_or_default();
    assert!(result.contains("Found it late."), "{last}");
    assert_eq!(messages[n - 1]["content"], "what did it find?", "{last}");
    assert_eq!(messages[n - 2]["content"].as_str(), Some(result.as_str()));
}

#[test]
fn a_definition_s_skills_are_in_its_sub_agent_s_prompt_and_its_tools_are_held() {
    let env = Env::new();
    env.file(
        ".claude/skills/house-style/SKILL.md",
        "---\nname: house-style\ndescription: How we write\n---\nAlways say ahoy.\n",
    );
    env.file(
        ".claude/agents/writer.md",
        "---\nname: writer\ndescription: Writes\ntools: Read, Grep\nskills: [house-style, nowhere]\n---\nYou write.\n",
    );
    let fake = FakeModel::start([
        task("call_w", json!({"agent": "writer", "prompt": "write"})),
        Reply::from(text_chunks(&["Ahoy."])),
        Reply::from(text_chunks(&["Done."])),
    ]);
    let out = env.run(Some(&fake), &["-p", "go"]);
    assert_eq!(out.code, 0, "{out:?}");
    let requests = fake.requests();
    let system = system_prompt(&requests[1].body);
    assert!(system.starts_with("You write."), "{system}");
    assert!(
        system.contains("## Skill house-style\nAlways say ahoy."),
        "{system}"
    );
    let mut names = tool_names(&requests[1].body);
    names.sort();
    assert_eq!(names, ["grep", "read"]);
    let result = &tool_results(&requests[2].body)[0];
    assert!(
        result.contains("[not granted: no skill nowhere to load]"),
        "{result}"
    );
}

#[test]
fn a_definition_naming_an_acp_agent_runs_that_agent_through_oml_s_client() {
    let env = Env::new();
    let oml = env!("CARGO_BIN_EXE_oml");
    env.init(&format!(
        "(client.defagent :sub {{:command {oml:?} :args [:acp]}})\n"
    ));
    env.file(
        ".oml/agents/outside.md",
        "---\nname: outside\ndescription: Another agent\nacp: sub\n---\nYou review.\n",
    );
    let fake = FakeModel::start([
        task(
            "call_o",
            json!({"agent": "outside", "prompt": "what is 2+2"}),
        ),
        Reply::from(text_chunks(&["4, says the other agent"])),
        Reply::from(text_chunks(&["It is 4."])),
    ]);
    let out = env.run(Some(&fake), &["-p", "ask the other agent"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("It is 4."), "{out:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    // The other agent (another oml over ACP) got the definition's instructions and the task.
    let asked = requests[1].body["messages"].to_string();
    assert!(asked.contains("You review.\\n\\nwhat is 2+2"), "{asked}");
    let result = &tool_results(&requests[2].body)[0];
    assert_eq!(
        result,
        "4, says the other agent\n\n[outside (sub) stopped: end-turn]"
    );
}

/// The `state_update` state of message `m` (`idle:end_turn` with its stop reason), if it is one.
fn state_of(m: &Value) -> Option<String> {
    let u = &m["params"]["update"];
    (u["sessionUpdate"] == "state_update").then(|| match u["stopReason"].as_str() {
        Some(reason) => format!("{}:{reason}", u["state"].as_str().unwrap_or("?")),
        None => u["state"].as_str().unwrap_or("?").to_owned(),
    })
}

/// The text of the update of message `m` when it is of `kind` (a chunk), else "".
fn chunk_text(m: &Value, kind: &str) -> String {
    let u = &m["params"]["update"];
    if u["sessionUpdate"] == kind {
        u["content"]["text"].as_str().unwrap_or_default().to_owned()
    } else {
        String::new()
    }
}

#[test]
fn over_acp_v2_a_background_result_after_the_turn_wakes_the_session_into_a_turn_of_its_own() {
    let env = Env::new();
    env.init("(setq acp.protocol-versions [1 2])\n");
    let fake = FakeModel::start([
        task(
            "call_bg",
            json!({"agent": "explore", "prompt": "look slowly", "background": true}),
        ),
        // The parent's last call and the sub-agent's race for these two; both work, and the
        // parent's last call has begun before the sub-agent answers.
        slow_text(RACE_ANSWER_MS, "Working."),
        slow_text(RACE_ANSWER_MS, "Working."),
        Reply::from(text_chunks(&["The background look is in."])),
    ]);
    let mut c = Editor::spawn(env.command(Some(&fake), &["acp"])).titles_apart();
    c.call(
        "initialize",
        json!({"protocolVersion": 2, "info": {"name": "x", "version": "1"}, "capabilities": {}}),
    );
    let r = c.call("session/new", json!({"cwd": env.project, "mcpServers": []}));
    let sid = r["result"]["sessionId"].as_str().unwrap().to_owned();
    let id = c.prompt(&sid, "look in the background");
    let (_, ack) = c.until_response(id);
    assert!(ack["result"]["messageId"].is_string(), "{ack}");
    let ended = c.until(|m| state_of(m).is_some_and(|s| s.starts_with("idle")));
    assert_eq!(
        state_of(&ended).as_deref(),
        Some("idle:end_turn"),
        "{ended}"
    );
    // No prompt sent: the result wakes the session, and a turn of its own answers it.
    let mut woken = Vec::new();
    let mut states = Vec::new();
    while !states.iter().any(|s: &String| s.starts_with("idle")) {
        let m = c.next();
        if let Some(s) = state_of(&m) {
            states.push(s);
        }
        woken.push(m);
    }
    assert_eq!(states, ["running", "idle:end_turn"], "{woken:#?}");
    let user: String = woken
        .iter()
        .map(|m| chunk_text(m, "user_message_chunk"))
        .collect();
    assert!(
        user.starts_with("[Background task task-1 (explore) has finished]\nWorking."),
        "{woken:#?}"
    );
    let answer: String = woken
        .iter()
        .map(|m| chunk_text(m, "agent_message_chunk"))
        .collect();
    assert_eq!(answer, "The background look is in.", "{woken:#?}");
    let first_user = woken
        .iter()
        .position(|m| !chunk_text(m, "user_message_chunk").is_empty());
    let first_agent = woken
        .iter()
        .position(|m| !chunk_text(m, "agent_message_chunk").is_empty());
    assert!(first_user < first_agent, "{woken:#?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    let woke = posted(&requests[3].body).unwrap_or_default();
    assert!(woke.contains("Working."), "{woke}");
    // A prompt after it is a turn as usual, with the woken turn in its history.
    fake.push(Reply::from(text_chunks(&["Noted."])));
    let id = c.prompt(&sid, "thanks");
    c.until_response(id);
    let ended = c.until(|m| state_of(m).is_some_and(|s| s.starts_with("idle")));
    assert_eq!(
        state_of(&ended).as_deref(),
        Some("idle:end_turn"),
        "{ended}"
    );
    let last = fake.requests().last().expect("a request").body.to_string();
    assert!(last.contains("The background look is in."), "{last}");
}

#[test]
fn over_acp_v1_a_background_result_after_the_turn_starts_no_turn_by_itself() {
    let env = Env::new();
    let fake = FakeModel::start([
        task(
            "call_bg",
            json!({"agent": "explore", "prompt": "look slowly", "background": true}),
        ),
        slow_text(RACE_ANSWER_MS, "Found it late."),
        slow_text(RACE_ANSWER_MS, "Found it late."),
    ]);
    let mut ed = Editor::spawn(env.command(Some(&fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session_with(&env.project, json!([]));
    let (updates, reason) = ed.turn(&sid, "look in the background");
    assert_eq!(reason, "end_turn");
    let completed = |m: &Value| {
        m["params"]["update"]["toolCallId"] == "call_bg:background"
            && m["params"]["update"]["status"] == "completed"
    };
    if !updates.iter().any(completed) {
        ed.until(completed);
    }
    // The result is posted; nothing asks the model until the next prompt.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(fake.requests().len(), 3, "{:#?}", fake.requests());
}

#[test]
fn over_acp_v2_a_result_too_late_for_the_turn_wakes_it_as_it_ends_and_a_prompt_waits_behind() {
    let env = Env::new();
    env.init("(setq acp.protocol-versions [1 2])\n(setq agent.permission-mode :yolo)\n");
    let command = json!({"command": "sleep 0.3; echo early", "background": true});
    let fake = FakeModel::start([
        calls(&[("c1", "bash", command)]),
        // The command ends while this, the turn's last model call, streams.
        slow_text(1500, "Started."),
        slow_text(1000, "It said early."),
        Reply::from(text_chunks(&["Queued answer."])),
    ]);
    let mut c = Editor::spawn(env.command(Some(&fake), &["acp"])).titles_apart();
    c.call(
        "initialize",
        json!({"protocolVersion": 2, "info": {"name": "x", "version": "1"}, "capabilities": {}}),
    );
    let r = c.call("session/new", json!({"cwd": env.project, "mcpServers": []}));
    let sid = r["result"]["sessionId"].as_str().unwrap().to_owned();
    let id = c.prompt(&sid, "start it");
    c.until_response(id);
    c.until(|m| state_of(m).is_some_and(|s| s.starts_with("idle")));
    // The woken turn: running; a prompt sent now waits behind it.
    c.until(|m| state_of(m).as_deref() == Some("running"));
    let queued = c.prompt(&sid, "and then?");
    let mut seen = Vec::new();
    while seen
        .iter()
        .filter(|s: &&String| s.starts_with("idle"))
        .count()
        < 2
    {
        let m = c.next();
        if let Some(s) = state_of(&m) {
            seen.push(s);
        } else if m.get("method").is_none() && m["id"] == json!(queued) {
            seen.push("ack".to_owned());
        }
    }
    assert_eq!(seen, ["idle:end_turn", "ack", "running", "idle:end_turn"]);
    let requests = fake.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    let woke = posted(&requests[2].body).unwrap_or_default();
    assert!(woke.contains("early"), "{woke}");
    let last = user_texts(&requests[3].body);
    assert_eq!(
        last.last().map(String::as_str),
        Some("and then?"),
        "{last:?}"
    );
}

#[test]
fn over_acp_v2_session_cancel_cancels_a_woken_turn() {
    let env = Env::new();
    env.init("(setq acp.protocol-versions [1 2])\n(setq agent.permission-mode :yolo)\n");
    let command = json!({"command": "sleep 0.5; echo early", "background": true});
    let fake = FakeModel::start([
        calls(&[("c1", "bash", command)]),
        Reply::from(text_chunks(&["Started."])),
        support::acp::partial_then_hang("Reading"),
    ]);
    let mut c = Editor::spawn(env.command(Some(&fake), &["acp"])).titles_apart();
    c.call(
        "initialize",
        json!({"protocolVersion": 2, "info": {"name": "x", "version": "1"}, "capabilities": {}}),
    );
    let r = c.call("session/new", json!({"cwd": env.project, "mcpServers": []}));
    let sid = r["result"]["sessionId"].as_str().unwrap().to_owned();
    let id = c.prompt(&sid, "start it");
    c.until_response(id);
    c.until(|m| state_of(m).is_some_and(|s| s.starts_with("idle")));
    c.until(|m| state_of(m).as_deref() == Some("running"));
    c.until(|m| chunk_text(m, "agent_message_chunk").contains("Reading"));
    c.notify("session/cancel", json!({"sessionId": sid}));
    let ended = c.until(|m| state_of(m).is_some_and(|s| s.starts_with("idle")));
    assert_eq!(
        state_of(&ended).as_deref(),
        Some("idle:cancelled"),
        "{ended}"
    );
    // The session goes on as usual.
    fake.push(Reply::from(text_chunks(&["Here."])));
    let id = c.prompt(&sid, "still there?");
    c.until_response(id);
    let ended = c.until(|m| state_of(m).is_some_and(|s| s.starts_with("idle")));
    assert_eq!(
        state_of(&ended).as_deref(),
        Some("idle:end_turn"),
        "{ended}"
    );
    assert_eq!(fake.requests().len(), 4);
}

#[test]
fn background_tasks_past_agent_max_background_are_an_error_result_naming_the_limit() {
    let env = Env::new();
    env.init("(setq agent.max-background 1)\n");
    let fake = FakeModel::start([
        calls(&[
            (
                "c1",
                "bash",
                json!({"command": "sleep 2; echo one", "background": true}),
            ),
            (
                "c2",
                "bash",
                json!({"command": "echo two", "background": true}),
            ),
            (
                "c3",
                "task",
                json!({"agent": "explore", "prompt": "look", "background": true}),
            ),
            (
                "c4",
                "task",
                json!({"agent": "explore", "prompt": "look", "background": true}),
            ),
        ]),
        Reply::from(text_chunks(&["Waiting."])),
        Reply::from(text_chunks(&["One is done."])),
    ]);
    let out = env.run(Some(&fake), &["-p", "start many"]);
    assert_eq!(out.code, 0, "{out:?}");
    let requests = fake.requests();
    let first = tool_results(&requests[1].body);
    assert!(
        first[0].starts_with("Started task-1 in the background"),
        "{first:?}"
    );
    for refused in &first[1..] {
        assert!(
            refused.contains("already runs 1 background tasks (agent.max-background is 1)"),
            "{first:?}"
        );
    }
    // Only the one started woke the session: no sub-agent ever asked the model.
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let woke = posted(&requests[2].body).unwrap_or_default();
    assert!(woke.contains("one"), "{woke}");
}

/// A background command whose pid is written to `pid_file`, started over ACP in a new session.
fn acp_background_server(env: &Env, pid_file: &std::path::Path) -> (Editor, String, FakeModel) {
    let server = format!("echo $$ > {}; exec sleep 120", pid_file.display());
    let fake = FakeModel::start([
        calls(&[("c1", "bash", json!({"command": server, "background": true}))]),
        Reply::from(text_chunks(&["Started."])),
    ]);
    let mut ed = Editor::spawn(env.command(Some(&fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session_with(&env.project, json!([]));
    let id = ed.prompt(&sid, "start the server");
    let ask = ed.until(|m| m["method"] == "session/request_permission");
    ed.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    let (_, answer) = ed.until_response(id);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    (ed, sid, fake)
}

#[test]
fn closing_a_session_stops_its_background_commands() {
    let env = Env::new();
    let pid_file = env.root.join("server.pid");
    let (mut ed, sid, _fake) = acp_background_server(&env, &pid_file);
    let pid = support::home::wait_for_pid(&pid_file);
    assert!(support::home::process_runs(pid));
    let closed = ed.call("session/close", json!({"sessionId": sid}));
    assert!(closed.get("error").is_none(), "{closed}");
    assert!(
        support::home::poll_until(Duration::from_secs(20), || !support::home::process_runs(
            pid
        )),
        "the closed session's server {pid} still runs"
    );
}

#[test]
fn a_background_command_does_not_outlive_oml_acp() {
    let env = Env::new();
    let pid_file = env.root.join("server.pid");
    let (mut ed, _sid, _fake) = acp_background_server(&env, &pid_file);
    let pid = support::home::wait_for_pid(&pid_file);
    assert!(support::home::process_runs(pid));
    ed.close_stdin();
    assert!(
        ed.wait_exit(Duration::from_secs(30)).is_some(),
        "oml acp did not exit"
    );
    assert!(
        support::home::poll_until(Duration::from_secs(20), || !support::home::process_runs(
            pid
        )),
        "the server {pid} outlived oml acp"
    );
}

#[test]
fn a_worktree_task_outside_git_is_a_clear_error_result() {
    let env = Env::new();
    let fake = FakeModel::start([
        task(
            "call_w",
            json!({"agent": "explore", "prompt": "look", "isolation": "worktree"}),
        ),
        Reply::from(text_chunks(&["No git here."])),
    ]);
    let out = env.run(Some(&fake), &["-p", "look in a worktree"]);
    assert_eq!(out.code, 0, "{out:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let result = tool_results(&requests[1].body);
    assert!(
        result[0].starts_with("No worktree for the task: "),
        "{result:?}"
    );
    assert!(result[0].to_lowercase().contains("git"), "{result:?}");
}

#[test]
fn print_mode_ends_after_max_woken_turns_even_when_each_starts_another_background_task() {
    let env = Env::new();
    let mut replies = Vec::new();
    for i in 0..12 {
        let args = json!({"command": "sleep 0.3", "background": true});
        replies.push(Reply::from(tool_call_chunks(
            &format!("bg_{i}"),
            "bash",
            &[&args.to_string()],
        )));
        replies.push(Reply::from(text_chunks(&["Waiting."])));
    }
    let fake = FakeModel::start(replies);
    let out = env.run(Some(&fake), &["-p", "keep going"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr
            .contains("stopped after 8 turns woken by background tasks"),
        "{out:?}"
    );
    // The prompt's own turn and 8 woken ones, two model calls each.
    assert_eq!(fake.requests().len(), 18);
}
