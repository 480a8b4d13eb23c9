//! The `delegate` tool end to end: the real `oml` (as `oml acp` driven by the scripted editor of
//! `support::editor`, and in print mode) against the fake model, delegating to the scripted fake agent
//! (`oml-fake-agent`) over real pipes and to `oml acp` itself. Each test checks that no
//! sub-agent process is left.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::editor::Editor;
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::Env;

const FAKE: &str = env!("CARGO_BIN_EXE_oml-fake-agent");
const OML: &str = env!("CARGO_BIN_EXE_oml");
const WAIT: Duration = Duration::from_secs(20);

fn delegate(id: &str, agent: &str, prompt: &str) -> Reply {
    let args = json!({"agent": agent, "prompt": prompt}).to_string();
    Reply::from(tool_call_chunks(id, "delegate", &[&args]))
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn pid_in(path: &Path) -> i32 {
    let mut text = String::new();
    assert!(
        support::home::poll_until(WAIT, || {
            text = std::fs::read_to_string(path).unwrap_or_default();
            !text.trim().is_empty()
        }),
        "no pid in {}",
        path.display()
    );
    text.trim().parse().expect("a pid")
}

fn gone(pid: i32) -> bool {
    support::home::poll_until(WAIT, || !alive(pid))
}

/// The live processes (not zombies) started with this test's home, other than this one.
fn leftovers(env: &Env) -> Vec<i32> {
    let needle = format!("XDG_CONFIG_HOME={}", env.root.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'));
        if pid != std::process::id() as i32
            && !zombie
            && String::from_utf8_lossy(&environ).contains(&needle)
        {
            found.push(pid);
        }
    }
    found
}

fn nothing_left(env: &Env) {
    let mut left = Vec::new();
    let clean = support::home::poll_until(WAIT, || {
        left = leftovers(env);
        left.is_empty()
    });
    assert!(clean, "processes left running: {left:?}");
}

/// `(client.defagent NAME {:command FAKE :args [MODE] :env {...}})` with the pid file `pid`.
fn fake_agent(name: &str, mode: &str, pid: &Path, extra: &str) -> String {
    format!(
        "(client.defagent :{name} {{:command {FAKE:?} :args [{mode:?}] :env {{:FAKE_AGENT_PID_FILE {:?} {extra}}}}})\n",
        pid.display().to_string()
    )
}

/// The content of the last tool message in a recorded model request.
fn tool_result(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// `oml acp` in `env` against `fake`, with one new session (in `cwd`); the editor and the id.
fn session(env: &Env, fake: &FakeModel, cwd: &Path) -> (Editor, String) {
    let mut ed = Editor::spawn(env.command(Some(fake), &["acp"]));
    ed.initialize();
    let (sid, _) = ed.new_session_with(cwd, json!([]));
    (ed, sid)
}

fn card_text(m: &Value) -> String {
    m["params"]["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_delegated_turn_streams_into_the_card_asks_the_editor_and_keeps_its_session() {
    let env = Env::new();
    let pid_file = env.root.join("fake.pid");
    env.init(&fake_agent("fake", "delegate", &pid_file, ""));
    let fake = FakeModel::start([
        delegate("call_1", "fake", "review it"),
        Reply::from(text_chunks(&["Reviewed."])),
        delegate("call_2", "fake", "and again"),
        Reply::from(text_chunks(&["Twice."])),
    ]);
    let (mut ed, sid) = session(&env, &fake, &env.project);
    let id = ed.prompt(&sid, "get a review");

    // The card, the sub-agent's progress in it, then the question about its edit.
    let card = ed.until(|m| m["params"]["update"]["sessionUpdate"] == "tool_call");
    assert_eq!(card["params"]["update"]["title"], "Delegate to fake");
    // The question may overtake the progress drawn from the updates sent before it.
    let mut seen = Vec::new();
    let ask = ed.until(|m| {
        seen.push(m.clone());
        m["method"] == "session/request_permission"
    });
    let tc = &ask["params"]["toolCall"];
    assert_eq!(tc["toolCallId"], "call_1", "{ask}");
    assert_eq!(tc["title"], "fake: Edit notes.txt");
    assert_eq!(tc["kind"], "edit");
    assert_eq!(tc["content"][0]["type"], "diff");
    assert_eq!(tc["content"][0]["newText"], "new\n");
    ed.send(&json!({"jsonrpc": "2.0", "id": ask["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));
    let (after, r) = ed.until_response(id);
    assert_eq!(r["result"]["stopReason"], "end_turn");
    seen.extend(after);
    let progress: Vec<String> = seen
        .iter()
        .filter(|m| m["params"]["update"]["toolCallId"] == "call_1")
        .map(card_text)
        .collect();
    assert!(
        progress
            .iter()
            .any(|t| t.contains("- Read notes.txt (completed)")),
        "{progress:#?}"
    );

    let requests = fake.requests();
    let tools = requests[0].body["tools"].as_array().unwrap();
    let spec = tools
        .iter()
        .find(|t| t["function"]["name"] == "delegate")
        .expect("the delegate tool is offered");
    let description = spec["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("The agents: fake (oml-fake-agent)"),
        "{description}"
    );
    let result = tool_result(&requests[1].body);
    assert_eq!(
        result,
        "Permission: ok. Turn 1 in sess-1: review it\n\n[fake stopped: end-turn]"
    );

    // A follow-up goes to the same sub-agent session.
    let pid = pid_in(&pid_file);
    let id = ed.prompt(&sid, "once more");
    let ask = ed.until(|m| m["method"] == "session/request_permission");
    ed.send(&json!({"jsonrpc": "2.0", "id": ask["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}}}));
    ed.until_response(id);
    let result = tool_result(&fake.requests()[3].body);
    assert!(
        result.starts_with("Permission: no. Turn 2 in sess-1: and again"),
        "{result}"
    );
    assert_eq!(pid_in(&pid_file), pid);

    // Closing the oml session ends its sub-agent.
    let id = ed.request("session/close", json!({"sessionId": sid}));
    ed.until_response(id);
    assert!(gone(pid), "the sub-agent outlived its session");
    drop(ed);
    nothing_left(&env);
}

#[test]
fn cancelling_the_prompt_cancels_the_delegated_turn() {
    let env = Env::new();
    let pid_file = env.root.join("slow.pid");
    let cancel_file = env.root.join("cancelled");
    let extra = format!(
        ":FAKE_AGENT_CANCEL_FILE {:?}",
        cancel_file.display().to_string()
    );
    env.init(&fake_agent("slow", "wait-cancel", &pid_file, &extra));
    let fake = FakeModel::start([delegate("call_1", "slow", "take your time")]);
    let (mut ed, sid) = session(&env, &fake, &env.project);
    let id = ed.prompt(&sid, "delegate");
    ed.until(|m| card_text(m).contains("working on it"));
    ed.send(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}));
    let (_, r) = ed.until_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled");
    assert_eq!(
        std::fs::read_to_string(&cancel_file).unwrap_or_default(),
        "cancelled\n",
        "the sub-agent got session/cancel"
    );
    let pid = pid_in(&pid_file);
    drop(ed);
    assert!(gone(pid), "the sub-agent outlived oml");
    nothing_left(&env);
}

/// Print mode: `oml -p PROMPT` against `fake`; returns the run.
fn print(env: &Env, fake: &FakeModel, prompt: &str) -> support::home::Run {
    env.run(Some(fake), &["-p", prompt])
}

#[test]
fn failures_are_results_the_model_reads_and_nothing_is_left_running() {
    let env = Env::new();
    let pids: Vec<PathBuf> = (0..4).map(|i| env.root.join(format!("{i}.pid"))).collect();
    env.init(&format!(
        "{}{}{}{}(setq agent.delegate-timeout 1 agent.delegate-max-chars 1000)\n",
        fake_agent("crash", "exit-mid-turn", &pids[0], ""),
        fake_agent("stuck", "hang-in-turn", &pids[1], ""),
        fake_agent("chatty", "flood", &pids[2], ""),
        fake_agent("fake", "delegate", &pids[3], ""),
    ));
    let fake = FakeModel::start([
        delegate("call_1", "crash", "go"),
        delegate("call_2", "stuck", "go"),
        delegate("call_3", "chatty", "go"),
        delegate("call_4", "fake", "edit it"),
        delegate("call_5", "nobody", "go"),
        Reply::from(text_chunks(&["Done."])),
    ]);
    let out = print(&env, &fake, "delegate everything");
    assert_eq!(out.code, 0, "{out:?}");
    let requests = fake.requests();
    let results: Vec<String> = requests[1..].iter().map(|r| tool_result(&r.body)).collect();
    // The agent that exited mid-turn: its exit status and its last words.
    assert!(
        results[0].starts_with("The agent crash failed:"),
        "{}",
        results[0]
    );
    assert!(results[0].contains("exit status 7"), "{}", results[0]);
    assert!(results[0].contains("lost my model"), "{}", results[0]);
    // The agent that hangs: given up after agent.delegate-timeout.
    assert!(
        results[1].contains("gave no answer within 1s"),
        "{}",
        results[1]
    );
    // The huge answer: capped at agent.delegate-max-chars, with a footer.
    assert!(
        results[2].starts_with("chunk 0 chunk 1 "),
        "{}",
        &results[2][..80]
    );
    assert!(
        results[2].contains("\n[output truncated: "),
        "{}",
        results[2]
    );
    assert!(results[2].len() < 1200, "{} chars", results[2].len());
    // Print mode's policy (accept-edits) allows an edit inside the project.
    assert!(results[3].starts_with("Permission: ok. "), "{}", results[3]);
    assert!(
        results[4].starts_with("Unknown agent nobody; the agents are: chatty, crash, fake, stuck")
    );
    for pid in &pids {
        let pid = pid_in(pid);
        assert!(gone(pid), "sub-agent {pid} outlived oml");
    }
    nothing_left(&env);
}

#[test]
fn oml_delegates_to_oml_acp_itself() {
    let env = Env::new();
    env.init(&format!(
        "(client.defagent :sub {{:command {OML:?} :args [:acp]}})\n(agent.defdelegate :reviewer {{:agent :sub :model \"fake/cheap\" :system-prompt \"You review.\" :description \"a reviewer\"}})\n"
    ));
    let fake = FakeModel::start([
        delegate("call_1", "reviewer", "what is 2+2"),
        Reply::from(text_chunks(&["4, says the sub-agent"])),
        Reply::from(text_chunks(&["It is 4."])),
    ]);
    let out = print(&env, &fake, "ask the reviewer");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("It is 4."), "{out:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let description = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "delegate")
        .map(|t| t["function"]["description"].as_str().unwrap().to_owned())
        .unwrap();
    assert!(
        description.contains("reviewer (a reviewer, model fake/cheap); sub (oml)"),
        "{description}"
    );
    // The sub-agent's own model call: the profile's model, its instructions ahead of the task.
    let sub = &requests[1].body;
    assert_eq!(sub["model"], "fake/cheap");
    let user = sub["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap();
    assert_eq!(user["content"], "You review.\n\nwhat is 2+2");
    assert_eq!(
        tool_result(&requests[2].body),
        "4, says the sub-agent\n\n[reviewer stopped: end-turn]"
    );
    nothing_left(&env);
}

/// The recipes of `examples/lisp/delegates.fnl`, installed as the user's `lisp/` directory:
/// `/plan-review` hands the plan to one agent and its review to another, `/ask-all` asks two
/// agents at once and the model compares their answers.
#[test]
fn the_delegate_recipes_plan_review_and_ask_all() {
    let env = Env::new();
    let dir = env.root.join("config/oml/lisp");
    std::fs::create_dir_all(&dir).unwrap();
    let recipe = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/lisp/delegates.fnl");
    std::fs::copy(recipe, dir.join("delegates.fnl")).unwrap();
    let (a, b) = (env.root.join("a.pid"), env.root.join("b.pid"));
    env.init(&format!(
        "{}{}(require :delegates)\n(setq my.planner :alpha)\n(setq my.reviewer :beta)\n",
        fake_agent("alpha", "ok", &a, ""),
        fake_agent("beta", "ok", &b, "")
    ));
    let fake = FakeModel::start([Reply::from(text_chunks(&["They agree."]))]);

    let run = print(&env, &fake, "/plan-review add a test");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("## Plan (alpha)\nyou said: add a testHello, world!"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("## Review (beta)\nyou said: Review this plan for: add a test"),
        "{run:?}"
    );
    nothing_left(&env);

    let run = print(&env, &fake, "/ask-all what is 2+2");
    assert_eq!(run.code, 0, "{run:?}");
    for name in ["alpha", "beta"] {
        assert!(
            run.stdout
                .contains(&format!("## {name}\nyou said: what is 2+2Hello, world!")),
            "{run:?}"
        );
    }
    assert!(run.stdout.contains("They agree."), "{run:?}");
    let asked = &fake.requests()[0].body["messages"];
    let compared = asked.as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        compared.starts_with("Compare these answers to \"what is 2+2\"")
            && compared.contains("## beta"),
        "{compared}"
    );
    nothing_left(&env);
}

/// A delegate profile's `:fork-session`: the sub-agent (`oml acp`, which offers `session/fork`)
/// starts from a fork of a stored session instead of cold, so the delegated turn's model call
/// holds that session's conversation; the stored session itself is left as it was.
#[test]
fn a_delegate_can_start_from_a_fork_of_a_prepared_session() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::from(text_chunks(&["Primed."])),
        delegate("call_1", "primed", "and now?"),
        Reply::from(text_chunks(&["from the fork"])),
        Reply::from(text_chunks(&["Done."])),
    ]);
    let prime = env.run(Some(&fake), &["-p", "--json", "remember the codeword"]);
    assert_eq!(prime.code, 0, "{prime:?}");
    let result: Value = prime
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|v: &Value| v["type"] == "result")
        .expect("a result line");
    let base = result["session"].as_str().expect("a session id").to_owned();
    env.init(&format!(
        "(client.defagent :sub {{:command {OML:?} :args [:acp]}})\n(agent.defdelegate :primed {{:agent :sub :fork-session {base:?}}})\n"
    ));
    let out = print(&env, &fake, "ask the primed one");
    assert_eq!(out.code, 0, "{out:?}");
    let requests = fake.requests();
    assert_eq!(
        support::model::user_texts(&requests[2].body),
        ["remember the codeword", "and now?"]
    );
    let stored = std::fs::read_to_string(env.root.join(format!("state/oml/sessions/{base}.jsonl")))
        .expect("the prepared session");
    assert!(
        !stored.contains("and now?"),
        "the prepared session is left as it was"
    );
    nothing_left(&env);
}
