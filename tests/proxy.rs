//! `oml proxy` between a real client and the scripted agent (`oml-fake-agent`) over pipes: the
//! official Python SDK as the editor with advice in the proxy's init file, and a raw line
//! client for what a client library would hide (ids, key order, the end of both processes).

mod support;

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::home::{Home, poll_until};

const FAKE: &str = env!("CARGO_BIN_EXE_oml-fake-agent");

/// The proxy's init file for the SDK test: a prompt gets context first, the edit the agent asks
/// for is allowed in Lisp, and every message is logged.
const INIT: &str = r#"
(proxy.recipes.add-context "CONTEXT from the proxy")
(oml.advise* "proxy.on-permission" :answer-here
  (fn [ask params ask-editor]
    (if (= params.toolCall.kind :edit)
        {:outcome {:outcome :selected :optionId "ok-always"}}
        (ask params ask-editor))))
"#;

#[test]
fn the_python_sdk_through_the_proxy_sees_advice_and_everything_else_untouched() {
    let home = Home::new();
    let venv = tempfile::tempdir().expect("temp dir");
    let python = match support::home::python_sdk_venv(venv.path()) {
        Ok(p) => p,
        Err(why) => return support::home::skip(&why, support::home::INSTALL_PYTHON_SDK),
    };
    support::home::write(&home.user_init(), INIT);
    let pid_file = home.root.join("agent.pid");
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/acp_python_proxy_client.py");
    let cmd = home.blocking_command(&[]);
    let out = Command::new(&python)
        .arg(&script)
        .args([env!("CARGO_BIN_EXE_oml"), FAKE])
        .arg(&home.project)
        .envs(
            cmd.get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .env("FAKE_AGENT_PID_FILE", &pid_file)
        .current_dir(&home.project)
        .output()
        .expect("run the Python client");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(out.stdout.trim_ascii()).expect("one JSON line");
    assert_eq!(seen["agent"], "fake-agent");
    assert_eq!(
        seen["echo"],
        json!({"a": 1, "_meta": {"trace": "t-1"}}),
        "{seen}"
    );
    assert_eq!(seen["unknown"], -32601);
    assert_eq!(seen["stop"], "end_turn");
    let said = seen["said"].as_str().unwrap();
    assert!(
        said.contains("Permission: ok-always."),
        "answered in Lisp: {said}"
    );
    assert!(
        said.contains("Turn 1 in sess-1: CONTEXT from the proxy | the question"),
        "the advised prompt: {said}"
    );
    assert_eq!(
        seen["editor_asked"],
        json!([]),
        "the editor was never asked"
    );
    assert_eq!(seen["cancelled"], "cancelled");
    assert_eq!(seen["proxy_exit"], 0, "{seen}");
    // Nothing is left running: the proxy and the agent behind it.
    let proxy = seen["proxy_pid"].as_i64().unwrap() as i32;
    let agent: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for pid in [proxy, agent] {
        assert!(
            poll_until(Duration::from_secs(10), || gone(pid)),
            "pid {pid} is still running"
        );
    }
}

/// A raw client: lines in, lines out, the proxy's own stdio.
struct Raw {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Raw {
    fn start(home: &Home, mode: &str) -> Raw {
        Raw::command(home, &[FAKE, mode])
    }

    /// `oml proxy -- COMMAND…`.
    fn command(home: &Home, command: &[&str]) -> Raw {
        let mut child = home
            .blocking_command(&["proxy", "--"])
            .args(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start oml proxy");
        let out = BufReader::new(child.stdout.take().unwrap());
        Raw { child, out }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.out.read_line(&mut line).expect("read");
        line.trim_end().to_owned()
    }
}

#[test]
fn messages_lisp_leaves_alone_pass_byte_for_byte_and_a_dead_agent_fails_what_it_owed() {
    let home = Home::new();
    let mut raw = Raw::start(&home, "exit-mid-turn");
    // Odd ids, key order, an unknown field: the agent's answer comes back as it sent it.
    raw.send(r#"{"params":{"protocolVersion":1,"_meta":{"k":[1,{}]}},"id":"init-x","method":"initialize","jsonrpc":"2.0"}"#);
    let init: Value = serde_json::from_str(&raw.line()).unwrap();
    assert_eq!(init["id"], "init-x");
    raw.send(
        r#"{"jsonrpc":"2.0","id":7,"method":"_fake/echo","params":{"z":1,"a":{"_meta":null}}}"#,
    );
    // (The scripted agent keeps the order it read the keys in.)
    assert_eq!(
        raw.line(),
        r#"{"jsonrpc":"2.0","id":7,"result":{"z":1,"a":{"_meta":null}}}"#
    );
    raw.send(
        r#"{"jsonrpc":"2.0","id":8,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
    );
    let new: Value = serde_json::from_str(&raw.line()).unwrap();
    assert_eq!(new["result"]["sessionId"], "sess-1");
    raw.send(r#"{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hi"}]}}"#);
    let chunk: Value = serde_json::from_str(&raw.line()).unwrap();
    assert_eq!(chunk["params"]["update"]["content"]["text"], "starting");
    // The agent exits mid-turn: the prompt it owed is answered with an error, and the proxy ends.
    let failed: Value = serde_json::from_str(&raw.line()).unwrap();
    assert_eq!(failed["id"], 9, "{failed}");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exit status 7"),
        "{failed}"
    );
    let status = support::home::wait_within(&mut raw.child, Duration::from_secs(20))
        .expect("the proxy ends");
    assert_eq!(status.code(), Some(1));
}

#[test]
fn the_editor_going_away_ends_the_agent_and_the_proxy() {
    let home = Home::new();
    let pid_file = home.root.join("agent.pid");
    let mut child = home
        .blocking_command(&["proxy", "--", FAKE, "ignores-stdin-eof"])
        .env("FAKE_AGENT_PID_FILE", &pid_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start oml proxy");
    // The file is made before the pid is written into it: wait for a pid, not for the file.
    let read_pid =
        || -> Option<i32> { std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok() };
    assert!(poll_until(Duration::from_secs(10), || read_pid().is_some()));
    let agent: i32 = read_pid().expect("the agent's pid");
    drop(child.stdin.take());
    let status =
        support::home::wait_within(&mut child, Duration::from_secs(20)).expect("the proxy ends");
    assert_eq!(status.code(), Some(0));
    assert!(
        poll_until(Duration::from_secs(10), || gone(agent)),
        "an agent that ignores EOF and SIGTERM is killed"
    );
}

#[test]
fn the_recipes_log_redact_add_mcp_servers_and_answer_by_policy() {
    let home = Home::new();
    let log = home.root.join("proxy.ndjson");
    let seen = home.root.join("new-session.json");
    support::home::write(
        &home.user_init(),
        &format!(
            r#"(proxy.recipes.log {log:?})
(proxy.recipes.redact ["sk%-%w+"])
(proxy.recipes.policy {{:refuse ["notes.txt"]}})
(proxy.recipes.add-mcp-servers [{{:name "extra" :command "/bin/true" :args [] :env []}}])"#,
            log = log.display().to_string()
        ),
    );
    let mut child = home
        .blocking_command(&["proxy", "--", FAKE, "delegate"])
        .env("FAKE_AGENT_NEW_SESSION_FILE", &seen)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start oml proxy");
    let mut raw = Raw {
        out: BufReader::new(child.stdout.take().unwrap()),
        child,
    };
    raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
    raw.line();
    raw.send(
        r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
    );
    raw.line();
    let params: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(params["mcpServers"][0]["name"], "extra", "{params}");
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"my key is sk-abc123"}]}}"#);
    let mut lines = Vec::new();
    loop {
        let line: Value = serde_json::from_str(&raw.line()).unwrap();
        let done = line["id"] == 3;
        lines.push(line);
        if done {
            break;
        }
    }
    assert!(
        lines
            .iter()
            .all(|l| l["method"] != "session/request_permission"),
        "the policy answered: {lines:?}"
    );
    let text: String = lines
        .iter()
        .filter_map(|l| l["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(
        text.contains("Permission: no.") && text.contains("my key is [REDACTED]"),
        "{text}"
    );
    drop(raw.child.stdin.take());
    support::home::wait_within(&mut raw.child, Duration::from_secs(20)).expect("the proxy ends");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.lines().count() > 8 && !logged.contains("sk-abc123"),
        "{logged}"
    );
    assert!(logged.lines().all(|l| {
        serde_json::from_str::<Value>(l)
            .is_ok_and(|v| v["dir"] == "to-agent" || v["dir"] == "to-client")
    }));
}

fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

/// The conductor of the proxy-chains RFD (`agent-client-protocol-conductor`, installed by
/// scripts/setup.sh), or `None` after reporting it missing.
fn conductor() -> Option<std::path::PathBuf> {
    let home = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_default();
    let installed = home.join(".cargo/bin/agent-client-protocol-conductor");
    if installed.exists() {
        return Some(installed);
    }
    support::home::skip(
        "agent-client-protocol-conductor",
        "scripts/setup.sh installs it (cargo install agent-client-protocol-conductor --version 5.0.0 --locked)",
    );
    None
}

#[test]
fn oml_proxy_is_a_component_of_the_conductors_proxy_chain() {
    let Some(conductor) = conductor() else { return };
    let home = Home::new();
    support::home::write(
        &home.user_init(),
        r#"(proxy.recipes.add-context "CONTEXT from the chain")"#,
    );
    let oml = env!("CARGO_BIN_EXE_oml");
    let cmd = home.blocking_command(&[]);
    let mut child = Command::new(conductor)
        .args(["agent", &format!("{oml} proxy"), &format!("{FAKE} ok")])
        .envs(
            cmd.get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .current_dir(&home.project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the conductor");
    let mut raw = Raw {
        out: BufReader::new(child.stdout.take().unwrap()),
        child,
    };
    raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#);
    let init: Value = serde_json::from_str(&raw.line()).unwrap();
    assert_eq!(init["result"]["agentInfo"]["name"], "fake-agent", "{init}");
    raw.send(
        r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
    );
    let new: Value = serde_json::from_str(&raw.line()).unwrap();
    assert_eq!(new["result"]["sessionId"], "sess-1", "{new}");
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hi"}]}}"#);
    let mut text = String::new();
    loop {
        let line: Value = serde_json::from_str(&raw.line()).unwrap();
        if line["id"] == 3 {
            assert_eq!(line["result"]["stopReason"], "end_turn", "{line}");
            break;
        }
        text.push_str(
            line["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or(""),
        );
    }
    assert!(
        text.starts_with("you said: CONTEXT from the chain | hi"),
        "the proxy's advice ran in the chain: {text}"
    );
    drop(raw.child.stdin.take());
    let status = support::home::wait_within(&mut raw.child, Duration::from_secs(20))
        .expect("the conductor ends");
    assert!(status.success(), "{status:?}");
}

/// The editor's answer to a permission question is the agent's only answer: no error follows it
/// with the same id. (A shell `tee` between the proxy and the agent records what the agent was
/// sent.)
#[test]
fn a_permission_question_gets_the_editors_answer_and_nothing_else() {
    let home = Home::new();
    let sent = home.root.join("to-agent.ndjson");
    let pipeline = format!("tee {} | {FAKE} prompt-permission", sent.display());
    let mut raw = Raw::command(&home, &["sh", "-c", &pipeline]);
    raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
    raw.line();
    raw.send(
        r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
    );
    raw.line();
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hi"}]}}"#);
    let asked = loop {
        let line: Value = serde_json::from_str(&raw.line()).unwrap();
        if line["method"] == "session/request_permission" {
            break line;
        }
    };
    raw.send(
        &json!({"jsonrpc": "2.0", "id": asked["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}})
        .to_string(),
    );
    let mut said = String::new();
    loop {
        let line: Value = serde_json::from_str(&raw.line()).unwrap();
        if line["id"] == 3 {
            break;
        }
        said.push_str(
            line["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or(""),
        );
    }
    assert!(said.contains("selected allow"), "{said}");
    // Whatever the proxy sent the agent about the question went out before the prompt's answer
    // came back; an echo afterwards is read by the agent after all of it.
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"_fake/echo","params":{}}"#);
    let echo: Value = serde_json::from_str(&raw.line()).unwrap();
    assert_eq!(echo["id"], 4);
    let to_agent = std::fs::read_to_string(&sent).unwrap();
    let about_it: Vec<Value> = to_agent
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m.get("method").is_none() && m["id"] == asked["id"])
        .collect();
    assert_eq!(about_it.len(), 1, "one answer: {about_it:?}");
    assert_eq!(about_it[0]["result"]["outcome"]["optionId"], "allow");
    drop(raw.child.stdin.take());
    support::home::wait_within(&mut raw.child, Duration::from_secs(20)).expect("the proxy ends");
}

/// A step that answers a request and also returns it to send on answers it once: the request
/// does not go on to the agent, whose answer would be a second one with the same id.
#[test]
fn a_request_a_step_answers_is_not_also_sent_on() {
    let home = Home::new();
    support::home::write(
        &home.user_init(),
        "(let [dispatch proxy.dispatch]
           (set proxy.dispatch
                (fn [direction msg forward]
                  (if (= msg.method \"_fake/echo\")
                      (values msg {:result {:from \"the step\"}})
                      (dispatch direction msg forward)))))",
    );
    let mut raw = Raw::start(&home, "plain");
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"_fake/echo","params":{"from":"the agent"}}"#);
    let first: Value = serde_json::from_str(&raw.line()).unwrap();
    assert_eq!(first["id"], 4);
    assert_eq!(first["result"]["from"], "the step", "{first}");
    raw.send(r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1}}"#);
    let next: Value = serde_json::from_str(&raw.line()).unwrap();
    assert_eq!(next["id"], 5, "a second answer to 4 came first: {next}");
    drop(raw.child.stdin.take());
    support::home::wait_within(&mut raw.child, Duration::from_secs(20)).expect("the proxy ends");
}

/// An editor stops its agent with SIGTERM or SIGHUP: the proxy ends the agent and exits 0, as
/// `oml acp` does.
#[test]
fn sigterm_and_sighup_end_the_agent_and_the_proxy_with_status_0() {
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        let home = Home::new();
        let pid_file = home.root.join("agent.pid");
        let mut child = home
            .blocking_command(&["proxy", "--", FAKE, "ok"])
            .env("FAKE_AGENT_PID_FILE", &pid_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start oml proxy");
        let mut raw = Raw {
            out: BufReader::new(child.stdout.take().unwrap()),
            child,
        };
        // An answer through the proxy: it is serving (and listening for signals).
        raw.send(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
        );
        let init: Value = serde_json::from_str(&raw.line()).unwrap();
        assert_eq!(init["result"]["agentInfo"]["name"], "fake-agent");
        let agent: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SAFETY: kill with the pid of the proxy this test started.
        unsafe { libc::kill(raw.child.id() as i32, signal) };
        let status = support::home::wait_within(&mut raw.child, Duration::from_secs(20))
            .expect("the proxy ends");
        assert_eq!(status.code(), Some(0), "signal {signal}: {status:?}");
        assert!(
            poll_until(Duration::from_secs(10), || gone(agent)),
            "signal {signal}: the agent was ended"
        );
    }
}

/// Everything after `--` is the command, also a single word (a path with no arguments).
#[test]
fn one_word_after_the_double_dash_is_the_agents_command() {
    let home = Home::new();
    let mut raw = Raw::command(&home, &[FAKE]);
    raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
    let init: Value = serde_json::from_str(&raw.line()).unwrap();
    assert_eq!(init["result"]["agentInfo"]["name"], "fake-agent", "{init}");
    drop(raw.child.stdin.take());
    let status = support::home::wait_within(&mut raw.child, Duration::from_secs(20))
        .expect("the proxy ends");
    assert_eq!(status.code(), Some(0));
}

/// The editor closes the proxy's stdin; the agent (`sh -c 'cat; …'`) ends by itself at its EOF,
/// and the proxy exits as soon as it has: well within the grace the shutdown ladder gives an
/// agent before SIGTERM (`CLOSE_GRACE`, 2 s), which is for agents that do not end.
#[test]
fn the_proxy_exits_as_soon_as_its_agent_has_after_the_editor_leaves() {
    let home = Home::new();
    let ended = home.root.join("agent-ended");
    let script = format!("cat; echo clean > {}", ended.display());
    let mut raw = Raw::command(&home, &["sh", "-c", &script]);
    raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"_echo","params":{}}"#);
    // `cat` echoes the line back: the agent is up and the proxy forwards both ways.
    assert!(raw.line().contains(r#""method":"_echo""#));
    drop(raw.child.stdin.take());
    let status = support::home::wait_within(&mut raw.child, BEFORE_THE_LADDER)
        .expect("the proxy exits with its agent, before the ladder's SIGTERM would come");
    assert_eq!(status.code(), Some(0));
    assert!(ended.exists(), "the agent ended by itself, after its EOF");
}

/// Well before the shutdown ladder's first step, SIGTERM `CLOSE_GRACE` (2 s) after EOF, which
/// is for agents that do not end: a proxy still there then did not exit with its agent. (It
/// took 2 s, whatever the agent.) The proxy's own end takes a few milliseconds; the margin is
/// for a loaded machine.
const BEFORE_THE_LADDER: Duration = Duration::from_millis(1500);
