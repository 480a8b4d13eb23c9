//! What `oml ask` prints and returns: `--json`'s ACP messages and result line, `--quiet`, every
//! exit status, the permission policies, the prompt from a file or stdin, usage errors, and a
//! session with `oml acp` itself.

use std::io::Write as _;
use std::process::Stdio;

use serde_json::Value;

use super::support::fake_model::{FakeModel, text_chunks};
use super::support::home::use_fake_model;
use super::{Shell, finish};

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn json_prints_each_acp_message_as_sent_then_one_result_line() {
    let shell = Shell::new("ok");
    let ran = shell.run(&["--json", "hi"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let lines = json_lines(&ran.stdout);
    let (result, messages) = lines.split_last().unwrap();
    for m in messages {
        assert_eq!(m["jsonrpc"], "2.0");
        assert_eq!(m["method"], "session/update");
        assert_eq!(m["params"]["sessionId"], "sess-1");
        assert_eq!(
            m["params"]["update"]["sessionUpdate"],
            "agent_message_chunk"
        );
    }
    let texts: Vec<&str> = messages
        .iter()
        .map(|m| m["params"]["update"]["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["you said: hi", "Hello, ", "world!"]);
    assert_eq!(
        *result,
        serde_json::json!({"type": "result", "sessionId": "sess-1", "stopReason": "end_turn",
            "text": "you said: hiHello, world!", "status": 0})
    );
}

#[test]
fn every_stop_reason_has_its_exit_status() {
    let shell = Shell::new("ok");
    for (reason, code) in [
        ("end_turn", 0),
        ("refusal", 3),
        ("max_turn_requests", 4),
        ("max_tokens", 5),
    ] {
        let ran = shell.run(&[&format!("stop:{reason}")]);
        assert_eq!(ran.code, code, "{reason}: {ran:?}");
        assert_eq!(ran.stdout, format!("stopping\n[done] {reason}\n"));
    }
    let quiet = shell.run(&["--quiet", "hi"]);
    assert_eq!(quiet.stdout, "you said: hiHello, world!\n");
    // Cancelled is 130 (owner.rs), a failed agent 1.
    let broken = Shell::new("early-exit");
    let ran = broken.run(&["--json", "hi"]);
    assert_eq!(ran.code, 1, "{ran:?}");
    let result = json_lines(&ran.stdout).pop().unwrap();
    assert_eq!(result["status"], 1);
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot find my configuration"),
        "{result}"
    );
}

#[test]
fn usage_errors_exit_2_and_say_what_is_wrong() {
    let shell = Shell::new("ok");
    let home = &shell.home;
    let cases: [(&[&str], &str); 4] = [
        (&["ask"], "name the agent"),
        (
            &["ask", "--agent", "x", "--set", "novalue", "hi"],
            "expected KEY=VALUE",
        ),
        (
            &["ask", "--agent", "x"],
            "the prompt read from stdin is empty",
        ),
        (
            &["ask", "--agent", "x", "sessions", "dance"],
            "not one of list, new, close, show, history",
        ),
    ];
    for (args, said) in cases {
        let out = home.blocking_command(args).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
    let unknown = home
        .blocking_command(&["ask", "nosuch", "hi"])
        .output()
        .expect("run");
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no agent named nosuch"));
}

#[test]
fn permission_policies_allow_reject_or_ask_a_fennel_handler() {
    let shell = Shell::new("delegate");
    // No terminal here: the default allows reads, rejects the edit.
    let default = shell.run(&["first"]);
    assert!(default.stdout.contains("Permission: no."), "{default:?}");
    let all = shell.run(&["--approve-all", "second"]);
    assert!(all.stdout.contains("Permission: ok."), "{all:?}");
    let none = shell.run(&["--deny-all", "third"]);
    assert!(none.stdout.contains("Permission: no."), "{none:?}");
    let policy = shell.home.root.join("policy.fnl");
    std::fs::write(
        &policy,
        "(fn [req] (if (= req.tool-call.kind :edit) \"ok-always\" :reject))",
    )
    .unwrap();
    let asked = shell.run(&["--json", "--policy", policy.to_str().unwrap(), "fourth"]);
    let lines = json_lines(&asked.stdout);
    let question = lines
        .iter()
        .position(|l| l["method"] == "session/request_permission")
        .expect("asked");
    assert_eq!(
        lines[question]["answer"]["outcome"]["optionId"],
        "ok-always"
    );
    // The question comes after the updates the agent sent before it.
    assert_eq!(lines[question - 1]["params"]["update"]["toolCallId"], "t2");
    assert!(
        lines.last().unwrap()["text"]
            .as_str()
            .unwrap()
            .contains("Permission: ok-always. Turn 4 in sess-1: fourth")
    );
    let broken = shell.home.root.join("broken.fnl");
    std::fs::write(&broken, "(fn [req] (error \"no\"))").unwrap();
    let failed = shell.run(&["--policy", broken.to_str().unwrap(), "fifth"]);
    assert!(
        failed.stdout.contains("Permission: no."),
        "a failing policy rejects: {failed:?}"
    );
}

#[test]
fn the_prompt_comes_from_the_words_a_file_or_stdin() {
    let shell = Shell::new("ok");
    let file = shell.home.root.join("prompt.txt");
    std::fs::write(&file, "from the file").unwrap();
    let ran = shell.run(&["--quiet", "--file", file.to_str().unwrap()]);
    assert_eq!(ran.stdout, "you said: from the fileHello, world!\n");
    let mut child = shell
        .command(&["--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"piped in").unwrap();
    assert_eq!(finish(child).stdout, "you said: piped inHello, world!\n");
}

#[test]
fn a_session_with_oml_acp_itself_keeps_its_conversation_between_prompts() {
    let fake = FakeModel::start([
        text_chunks(&["Hello ", "from oml"]),
        text_chunks(&["Second"]),
    ]);
    let shell = Shell::new("ok");
    let ask = |words: &[&str]| {
        let mut cmd = shell.home.blocking_command(&["ask", "oml"]);
        cmd.args(words)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        use_fake_model(&mut cmd, &fake.base_url());
        finish(cmd.spawn().unwrap())
    };
    let first = ask(&["say hello"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(first.stdout, "Hello from oml\n[done] end_turn\n");
    let second = ask(&["and again"]);
    assert_eq!(second.stdout, "Second\n[done] end_turn\n");
    // The second request carries the first exchange: one oml session.
    let requests = fake.requests();
    let messages = requests[1].body["messages"].clone();
    let texts: Vec<String> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("say hello"))
            && texts.iter().any(|t| t.contains("Hello from oml")),
        "{texts:?}"
    );
    let status = {
        let out = shell
            .home
            .blocking_command(&["ask", "oml", "--json", "status"])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let closed = shell
        .home
        .blocking_command(&["ask", "oml", "sessions", "close"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&closed.stdout), "closed\n");
    let owner = status["status"]["owner_pid"].as_i64().unwrap() as i32;
    assert!(super::support::home::poll_until(
        std::time::Duration::from_secs(10),
        || super::gone(owner)
    ));
}

#[test]
fn on_a_terminal_the_default_policy_asks_what_is_not_a_read() {
    let shell = Shell::new("delegate");
    let mut cmd = shell
        .home
        .blocking_command(&["ask", "--agent", &shell.agent, "edit it"]);
    cmd.env_remove("CI");
    let term = super::support::pty::Term::spawn(cmd, 40, 120);
    let question = term.wait_for("Choose 1-3", std::time::Duration::from_secs(30));
    assert!(
        question.contains("Edit notes.txt (edit)") && question.contains("+new"),
        "{question}"
    );
    assert!(
        !question.contains("Read notes.txt (read)\n  1)"),
        "the read was not asked: {question}"
    );
    term.type_line("1");
    let screen = term.wait_for("[done] end_turn", std::time::Duration::from_secs(30));
    assert!(screen.contains("Permission: ok."), "{screen}");
    assert_eq!(term.wait_exit(std::time::Duration::from_secs(20)), Some(0));
}

#[test]
fn the_agents_text_reaches_the_terminal_without_escape_sequences_but_json_keeps_them() {
    let shell = Shell::new("ok");
    let hostile = "hi \u{1b}]0;pwned\u{7}\u{1b}[2Jthere\r\u{9b}31m";
    let ran = shell.run(&[hostile]);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(
        ran.stdout.starts_with("you said: hi there31m"),
        "{:?}",
        ran.stdout
    );
    assert!(
        !ran.stdout.contains(['\u{1b}', '\u{7}', '\r', '\u{9b}']),
        "{:?}",
        ran.stdout
    );
    let json = shell.run(&["--json", hostile]);
    let first = &json_lines(&json.stdout)[0];
    assert_eq!(
        first["params"]["update"]["content"]["text"],
        format!("you said: {hostile}")
    );
}

/// An agent update longer than the 64 MiB a client reads is not dropped in silence: the prompt
/// fails, naming the limit, and exits 1 (it used to say `[done] end_turn` and exit 0).
#[test]
fn an_agent_update_over_the_line_limit_fails_the_prompt_naming_the_limit() {
    let shell = Shell::new("over-limit");
    let ran = shell.run(&["hello"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("too long to read") && ran.stderr.contains("67108864"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stdout.contains("[done]"), "{}", ran.stdout);
}

/// A prompt over the limit (from `--file`) is refused before it is sent, naming the limit; it
/// used to fail with "the session's owner: Broken pipe". The same holds for `exec`.
#[test]
fn a_prompt_over_the_line_limit_is_refused_naming_the_limit() {
    let shell = Shell::new("ok");
    let file = shell.home.root.join("big-prompt.txt");
    std::fs::write(&file, "y".repeat(64 * 1024 * 1024 + 1024)).expect("write the prompt");
    let file = file.display().to_string();
    for words in [&["--file", &file][..], &["--file", &file, "exec"][..]] {
        let ran = shell.run(words);
        assert_eq!(ran.code, 1, "{words:?}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("64 MiB") && ran.stderr.contains("the prompt is"),
            "{words:?}: {}",
            ran.stderr
        );
        assert!(!ran.stderr.contains("Broken pipe"), "{}", ran.stderr);
    }
}
