//! Descriptors: `oml acp` raises its soft `RLIMIT_NOFILE` to the hard limit at start, and many
//! sessions each running a tool turn at once fit under a low limit. The real binary runs with
//! the limit set in `pre_exec` (as `prlimit` would), driven over pipes by a scripted client,
//! against the fake model.

mod support;

use std::collections::HashSet;
use std::os::unix::process::CommandExt as _;

use serde_json::{Value, json};
use support::editor::Editor;
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::Env;

/// The descriptor limit (soft and hard) of the many-sessions test: a common default soft limit.
const LOW_LIMIT: libc::rlim_t = 256;
/// The sessions that run a tool turn at once under `LOW_LIMIT`.
const SESSIONS: usize = 200;
/// The soft and hard limits of the test that sees the soft one raised.
const SOFT: libc::rlim_t = 256;
const HARD: libc::rlim_t = 1024;

/// `oml acp` in `env` against `fake`, started with `RLIMIT_NOFILE` at `soft`/`hard`, driven by
/// the scripted editor.
fn spawn(env: &Env, fake: &FakeModel, soft: libc::rlim_t, hard: libc::rlim_t) -> Editor {
    let mut cmd = env.command(Some(fake), &["acp"]);
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: the closure only calls setrlimit, which is async-signal-safe, with a copy of a
    // plain struct.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    Editor::spawn(cmd)
}

/// The next message that is not a `session/update`.
fn next_message(agent: &mut Editor) -> Value {
    agent.until(|m| m["method"] != "session/update")
}

/// The soft `RLIMIT_NOFILE` of process `pid`, from `/proc/PID/limits`.
fn soft_nofile(pid: u32) -> String {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("the open files line");
    line.split_whitespace()
        .nth(3)
        .expect("the soft limit")
        .to_owned()
}

#[test]
fn the_soft_descriptor_limit_is_raised_to_the_hard_one() {
    let env = Env::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    let mut agent = spawn(&env, &fake, SOFT, HARD);
    // Once initialize answers, main has long run.
    agent.call("initialize", json!({"protocolVersion": 1}));
    assert_eq!(soft_nofile(agent.pid()), HARD.to_string());
}

/// Every session is prompted at once; the model's first replies are all `bash` calls, and the
/// answers are queued only once every session has asked its permission question, so that each
/// session gets exactly one call and one answer and all the commands start together when the
/// questions are answered.
#[test]
fn two_hundred_sessions_each_running_a_command_fit_in_256_descriptors() {
    let env = Env::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    let mut agent = spawn(&env, &fake, LOW_LIMIT, LOW_LIMIT);
    agent.call("initialize", json!({"protocolVersion": 1}));
    let cwd = env.project.display().to_string();
    let sids: Vec<String> = (0..SESSIONS)
        .map(|n| {
            let r = agent.call("session/new", json!({"cwd": cwd, "mcpServers": []}));
            let sid = r["result"]["sessionId"].as_str();
            sid.unwrap_or_else(|| panic!("session {n}: {r}")).to_owned()
        })
        .collect();
    let args = json!({"command": "echo hi"}).to_string();
    for _ in &sids {
        fake.push(Reply::from(tool_call_chunks("call_1", "bash", &[&args])));
    }
    let mut prompts: HashSet<u64> = sids
        .iter()
        .map(|sid| {
            agent.request(
                "session/prompt",
                json!({"sessionId": sid, "prompt": [{"type": "text", "text": "run"}]}),
            )
        })
        .collect();
    let mut questions = Vec::new();
    while questions.len() < SESSIONS {
        let v = next_message(&mut agent);
        assert_eq!(v["method"], "session/request_permission", "{v}");
        questions.push(v["id"].clone());
    }
    for _ in &sids {
        fake.push(Reply::from(text_chunks(&["done"])));
    }
    for q in &questions {
        let allow = json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}});
        agent.send(&json!({"jsonrpc": "2.0", "id": q, "result": allow}));
    }
    while !prompts.is_empty() {
        let v = next_message(&mut agent);
        let id = v["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("not a response: {v}"));
        assert!(prompts.remove(&id), "an unexpected response: {v}");
        assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
    }
    // Every command ran, and its output went back to the model.
    let results: Vec<String> = fake
        .requests()
        .iter()
        .filter_map(|r| {
            let last = r.body["messages"].as_array()?.last()?.clone();
            (last["role"] == "tool").then(|| last["content"].to_string())
        })
        .collect();
    assert_eq!(results.len(), SESSIONS);
    for r in &results {
        assert!(
            r.contains("hi") && !r.contains("os error"),
            "a command's result: {r}"
        );
    }
}
