//! Print mode's command line as scripts use it (`claude -p` habits): flags and words in any
//! order, the prompt from stdin, words and piped stdin together, the flags scripts need, and
//! the exit statuses; against the real binary and the fake model.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::process::Stdio;

use serde_json::{Value, json};
use support::fake_model::{
    FakeModel, Reply, Step, reasoning_chunks, text_chunks, tool_call_chunks, usage_chunk,
};
use support::home::{Env, Run};

/// `oml ARGS…` with `stdin` piped in (or /dev/null), against a fake model that answers "ok".
fn oml(args: &[&str], stdin: Option<&[u8]>) -> (Run, Vec<Value>) {
    let env = Env::new();
    // A first run makes a session for --continue to find.
    let fake = FakeModel::start([
        Reply::Stream(text_chunks(&["ok"])),
        Reply::Stream(text_chunks(&["ok"])),
    ]);
    if continues(args) {
        assert_eq!(env.run(Some(&fake), &["-p", "earlier"]).code, 0);
    }
    let mut cmd = env.command(Some(&fake), args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn oml");
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let bytes = bytes.to_vec();
        // Written from a thread: oml may stop reading at its cap.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }
    let run = Run::from(child.wait_with_output().expect("oml ends"));
    let bodies = fake.requests().into_iter().map(|r| r.body).collect();
    (run, bodies)
}

/// Whether `args` ask to continue the latest session.
fn continues(args: &[&str]) -> bool {
    args.iter()
        .take_while(|a| **a != "--")
        .any(|a| matches!(*a, "-c" | "--continue" | "-cp"))
}

/// The text of the last user message of the last request.
fn prompt_of(bodies: &[Value]) -> String {
    let messages = bodies.last().expect("a model request")["messages"]
        .as_array()
        .unwrap()
        .clone();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    user["content"].as_str().unwrap().to_owned()
}

#[test]
fn flags_and_words_go_in_any_order() {
    // (arguments, the prompt the model gets, JSON output?)
    let cases: &[(&[&str], &str, bool)] = &[
        (&["-p", "--json", "x"], "x", true),
        (&["-p", "x", "--json"], "x", true),
        (&["--json", "-p", "x"], "x", true),
        (&["--continue", "-p", "x"], "x", false),
        (&["-p", "-c", "x"], "x", false),
        (&["-cp", "x"], "x", false),
        (&["--print", "two", "words"], "two words", false),
        (&["prompt", "hi", "--json"], "hi", true),
        (
            &["--no-init", "prompt", "--json", "hi", "there"],
            "hi there",
            true,
        ),
        (&["-p", "--", "--json", "-c"], "--json -c", false),
    ];
    for (args, prompt, json) in cases {
        let (run, bodies) = oml(args, None);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
        assert_eq!(prompt_of(&bodies), *prompt, "{args:?}");
        let last = run.stdout.lines().last().unwrap_or("");
        assert_eq!(
            last.starts_with(r#"{"type":"result""#),
            *json,
            "{args:?}: {run:?}"
        );
        if continues(args) {
            let messages = bodies.last().unwrap()["messages"].as_array().unwrap().len();
            assert!(messages > 2, "{args:?} continues the earlier session");
        }
    }
}

#[test]
fn the_prompt_comes_from_stdin_or_from_both() {
    let (run, bodies) = oml(&["-p"], Some(b"from stdin\n"));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(prompt_of(&bodies), "from stdin\n");
    let (_, bodies) = oml(&["-p", "-"], Some(b"dash"));
    assert_eq!(prompt_of(&bodies), "dash");
    let (run, bodies) = oml(&["-p", "summarise"], Some(b"line one\nline two\n"));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        prompt_of(&bodies),
        "summarise\n\n<stdin>\nline one\nline two\n</stdin>"
    );
    // Stdin that is empty adds nothing.
    let (_, bodies) = oml(&["-p", "alone"], Some(b""));
    assert_eq!(prompt_of(&bodies), "alone");
}

#[test]
fn huge_stdin_is_read_up_to_a_cap_with_a_note() {
    let big = vec![b'x'; 12 * 1024 * 1024];
    let (run, bodies) = oml(&["-p", "count"], Some(&big));
    assert_eq!(run.code, 0, "{run:?}");
    let prompt = prompt_of(&bodies);
    assert!(
        prompt.contains("[stdin was longer than 10485760 bytes; only that much was read]"),
        "{}",
        &prompt[prompt.len() - 200..]
    );
    assert!(prompt.len() < 10 * 1024 * 1024 + 1000);
}

#[test]
fn the_flags_scripts_need() {
    let (run, bodies) = oml(&["-p", "--model", "other/model", "x"], None);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(bodies[0]["model"], "other/model");

    let env = Env::new();
    let extra = env.file("extra.md", "FROM-A-FILE");
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["ok"]))]);
    let run = env.run(
        Some(&fake),
        &[
            "-p",
            "--append-system-prompt",
            "FROM-A-FLAG",
            "--append-system-prompt-file",
            &extra.display().to_string(),
            "x",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let system = fake.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.ends_with("FROM-A-FLAG\n\nFROM-A-FILE"), "{system}");
}

#[test]
fn bad_command_lines_are_usage_errors() {
    let cases: &[(&[&str], &str)] = &[
        (&["-p", "--max-turns", "0", "x"], "--max-turns"),
        (&["-p", "--mode", "bogus", "x"], "--mode"),
        (&["-p", "--json"], "the prompt read from stdin is empty"),
        (&["-p", "--nope", "x"], "--nope"),
        (
            &["-p", "--append-system-prompt-file", "/no/such/file", "x"],
            "/no/such/file",
        ),
    ];
    for (args, said) in cases {
        let (run, bodies) = oml(args, None);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(said), "{args:?}: {run:?}");
        assert!(bodies.is_empty(), "{args:?} must not reach the model");
    }
}

#[test]
fn max_turns_stops_the_turn_with_its_own_status() {
    let env = Env::new();
    let call =
        || support::fake_model::tool_call_chunks("c", "bash", &[r#"{"command": "echo hi"}"#]);
    let fake = FakeModel::start([Reply::Stream(call()), Reply::Stream(call())]);
    let run = env.run(Some(&fake), &["-p", "--max-turns", "1", "--json", "loop"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(fake.requests().len(), 1);
    let result: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["stop_reason"], "max_turn_requests");
    assert_eq!(result["status"], 4);
    assert_eq!(result["model_calls"], 1);
}

#[test]
fn a_model_error_is_an_event_and_status_3() {
    let env = Env::new();
    let fake = FakeModel::start([Reply::error(500, "the server is on fire")]);
    env.init("(setq llm.max-retries 0)");
    let run = env.run(Some(&fake), &["-p", "--json", "hi"]);
    assert_eq!(run.code, 3, "{run:?}");
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "init");
    let error = &lines[lines.len() - 2];
    assert_eq!(error["type"], "error");
    assert_eq!(error["category"], "model");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("the server is on fire"),
        "{error}"
    );
    assert_eq!(lines[lines.len() - 1]["status"], 3);
}

#[test]
fn a_retried_request_is_a_notice_and_stderr_has_no_colour() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::error(503, "busy"),
        Reply::from(text_chunks(&["fine now"])),
    ]);
    env.init("(setq llm.retry-base-delay 0.01)");
    let run = env.run(Some(&fake), &["-p", "hi"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "fine now\n");
    assert!(
        run.stderr.contains("[model request failed (") && run.stderr.contains("(retry 1)]"),
        "{run:?}"
    );
    assert!(!run.stderr.contains('\x1b'), "{run:?}");
    let json = env.run(Some(&fake_again()), &["-p", "--json", "hi"]);
    let notice: Vec<Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "notice")
        .collect();
    assert_eq!(notice.len(), 1, "{json:?}");
    assert!(notice[0]["text"].as_str().unwrap().contains("retrying in"));
}

/// A retry notice says the failure once: the status and the provider's own message, not the
/// error's message wrapped in another nor the raw JSON body.
#[test]
fn a_retry_notice_names_the_status_and_the_providers_message_once() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::error(
            500,
            r#"{"error":{"message":"upstream overloaded","type":"server_error","code":null}}"#,
        ),
        Reply::from(text_chunks(&["fine now"])),
    ]);
    env.init("(setq llm.retry-base-delay 0.01)");
    let run = env.run(Some(&fake), &["-p", "hi"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("[model request failed (HTTP 500: upstream overloaded); retrying in"),
        "{run:?}"
    );
    assert!(!run.stderr.contains("Model request failed"), "{run:?}");
    assert!(!run.stderr.contains("server_error"), "{run:?}");
}

fn fake_again() -> FakeModel {
    FakeModel::start([
        Reply::error(429, "slow down"),
        Reply::from(text_chunks(&["ok"])),
    ])
}

#[test]
fn an_html_page_instead_of_a_stream_fails_at_once_and_says_what_came() {
    let env = Env::new();
    let page = "<html><head><title>Sign in to the proxy</title></head></html>";
    let fake = FakeModel::start([Reply::Page {
        content_type: "text/html; charset=utf-8".into(),
        body: page.into(),
    }]);
    let run = env.run(Some(&fake), &["-p", "hi"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr
            .contains("answered with text/html; charset=utf-8, not an event stream")
            && run.stderr.contains("Sign in to the proxy"),
        "{run:?}"
    );
    // Not retried: one request.
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn keep_alives_without_content_end_the_call_at_the_content_timeout() {
    let env = Env::new();
    env.init("(setq llm.content-timeout 0.5)");
    let mut steps = text_chunks(&["partial "]);
    steps.pop(); // no finish: the stream goes on
    for _ in 0..40 {
        steps.push(Step::Raw(": keep-alive\n\n".into()));
        steps.push(Step::Sleep(50));
    }
    let fake = FakeModel::start([Reply::Stream(steps)]);
    let run = env.run(Some(&fake), &["-p", "hi"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr
            .contains("the model sent no content for 0.5s (llm.content-timeout)"),
        "{run:?}"
    );
    assert!(run.stdout.starts_with("partial"), "{run:?}");
    // What streamed before the failure stays in the conversation, as a cancel's does, marked as
    // cut off.
    let next = FakeModel::start([Reply::from(text_chunks(&["ok"]))]);
    let run = env.run(Some(&next), &["-p", "--continue", "go on"]);
    assert_eq!(run.code, 0, "{run:?}");
    let messages = next.requests()[0].body["messages"].clone();
    let roles: Vec<(&str, &str)> = messages
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|m| {
            (
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        roles,
        [
            ("user", "hi"),
            (
                "assistant",
                "partial \n\n[This answer was cut off: the model sent no content for 0.5s \
                 (llm.content-timeout)]"
            ),
            ("user", "go on")
        ]
    );
}

/// Issue #26 item 15: a secret the user evaluates, or a tool reads, is not written into the
/// session file: the API key and a `sandbox.drop-env` variable's value are replaced by their
/// names in everything stored.
#[test]
fn secrets_are_redacted_in_the_session_file() {
    let env = Env::new();
    let key = "sk-test-0123456789abcdef";
    let db = "postgres://app:hunter2-secret@db/prod";
    env.init("(setq sandbox.drop-env [\"DATABASE_URL\"])");
    env.file("secrets.txt", &format!("key={key}\ndb={db}\n"));
    let vars = [("OPENAI_API_KEY", key), ("DATABASE_URL", db)];
    let run = env.run_with(None, &vars, &["-p", "/eval llm.api-key"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(key), "the user sees the value: {run:?}");
    let read = support::fake_model::tool_call_chunks("c1", "read", &[r#"{"path": "secrets.txt"}"#]);
    let fake = FakeModel::start([Reply::from(read), Reply::from(text_chunks(&["Read."]))]);
    let run = env.run_with(
        Some(&fake),
        &vars,
        &["-p", "--continue", "read secrets.txt"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let results = fake.requests()[1].body["messages"].to_string();
    assert!(results.contains(key), "the model reads the file as it is");

    let dir = env.root.join("state/oml/sessions");
    let mut stored = String::new();
    for file in std::fs::read_dir(&dir).expect("the sessions folder") {
        stored.push_str(&std::fs::read_to_string(file.unwrap().path()).unwrap());
    }
    assert!(stored.contains("read secrets.txt"), "{stored}");
    for secret in [key, db] {
        assert!(!stored.contains(secret), "{secret} is stored: {stored}");
    }
    assert!(stored.contains("[redacted OPENAI_API_KEY]"), "{stored}");
    assert!(stored.contains("[redacted DATABASE_URL]"), "{stored}");
}

/// A message larger than `LARGE_VALUE_BYTES` (4 MiB) takes another path into the session: its
/// line is written straight from the Lisp table, then the transcript copies it. The `write` of a
/// 5 MiB file holding the API key: the model sees the whole call in the next request, the file
/// has it whole with the key replaced, and `--continue` reads it back.
#[test]
fn a_message_over_four_mib_is_stored_whole_with_its_secrets_redacted() {
    let env = Env::new();
    // A window the 5 MiB call fits in: no compaction asks the model for a summary. With
    // OML_TEST_TAG set, advice on agent.build-request marks the messages that carry calls.
    env.init(
        r#"(setq llm.context-window 100000000)
(advise! agent.build-request :tag
  (fn [build messages]
    (when (os.getenv "OML_TEST_TAG")
      (each [_ m (ipairs messages)] (when m.tool_calls (set m.tagged true))))
    (build messages)))"#,
    );
    let key = "sk-test-large-0123456789abcdef";
    let content = format!("{}{key}{}", "a".repeat(3 << 20), "b".repeat(2 << 20));
    let args = json!({"path": "big.txt", "content": content}).to_string();
    let pieces: Vec<&str> = args
        .as_bytes()
        .chunks(64 << 10)
        .map(|c| std::str::from_utf8(c).expect("ASCII"))
        .collect();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("call_big", "write", &pieces)),
        Reply::from(text_chunks(&["Written."])),
        Reply::from(text_chunks(&["Still here."])),
    ]);
    let vars = [("OPENAI_API_KEY", key)];
    let run = env.run_with(Some(&fake), &vars, &["-p", "--mode", "yolo", "write it"]);
    assert_eq!(run.code, 0, "{run:?}");
    let written = std::fs::read_to_string(env.project.join("big.txt")).expect("big.txt");
    assert!(written == content, "the file is written whole");
    let call = |request: &support::fake_model::RecordedRequest| {
        request.body["messages"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["tool_calls"].is_array()))
            .map(|m| m["tool_calls"][0]["function"]["arguments"].clone())
    };
    assert!(
        call(&fake.requests()[1]) == Some(json!(args)),
        "the model sees its call as it made it"
    );

    let dir = env.root.join("state/oml/sessions");
    let mut stored = String::new();
    for file in std::fs::read_dir(&dir).expect("the sessions folder") {
        stored.push_str(&std::fs::read_to_string(file.unwrap().path()).unwrap());
    }
    assert!(!stored.contains(key), "the key is stored");
    assert!(stored.contains("[redacted OPENAI_API_KEY]"));
    // Read back, and changed by advice: the request has the change and the call whole.
    let vars = [("OPENAI_API_KEY", key), ("OML_TEST_TAG", "1")];
    let run = env.run_with(Some(&fake), &vars, &["-p", "--continue", "still there?"]);
    assert_eq!(run.code, 0, "{run:?}");
    let redacted = args.replace(key, "[redacted OPENAI_API_KEY]");
    let request = &fake.requests()[2];
    assert!(
        call(request) == Some(json!(redacted)),
        "the call is read back whole from the file"
    );
    let tagged = request.body["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["tagged"] == json!(true)));
    assert!(tagged, "advice on agent.build-request changes the request");
}

#[test]
fn llm_headers_go_with_every_request() {
    let env = Env::new();
    env.init(r#"(setq llm.headers {:X-Title "oml-test" :HTTP-Referer "https://example.org/oml"})"#);
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["ok"]))]);
    let run = env.run(Some(&fake), &["-p", "hi"]);
    assert_eq!(run.code, 0, "{run:?}");
    let request = &fake.requests()[0];
    assert_eq!(request.header("x-title"), Some("oml-test"));
    assert_eq!(
        request.header("http-referer"),
        Some("https://example.org/oml")
    );
    assert!(
        request.header("authorization").is_some(),
        "the key is still sent"
    );

    let env = Env::new();
    env.init(r#"(setq llm.headers {"not a name" "x"})"#);
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["ok"]))]);
    let run = env.run(Some(&fake), &["-p", "hi"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr
            .contains(r#"llm.headers: "not a name" is not a valid header name"#),
        "{run:?}"
    );
    assert!(fake.requests().is_empty());
}

#[test]
fn a_dash_p_after_another_command_is_that_commands() {
    let env = Env::new();
    let program = env.file("args.fnl", "(print (. arg 1) (. arg 2))");
    let run = env.run(None, &["run", &program.display().to_string(), "-p", "x"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "-p\tx\n");
}

#[test]
fn a_session_that_cannot_be_opened_still_ends_the_json_stream_with_a_result() {
    let (run, bodies) = oml(&["-p", "--json", "--session", "nope", "x"], None);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(bodies.is_empty());
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{run:?}");
    assert_eq!(lines[0]["type"], "error");
    assert_eq!(lines[0]["category"], "session");
    assert_eq!(lines[1]["type"], "result");
    assert_eq!(lines[1]["status"], 1);
}

#[test]
fn an_argument_that_is_not_utf8_is_not_a_panic() {
    use std::os::unix::ffi::OsStrExt as _;
    let env = Env::new();
    let out = env
        .command(None, &["eval"])
        .arg(std::ffi::OsStr::from_bytes(b"(+ 1 \xff)"))
        .output()
        .expect("run oml");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
}

/// Two processes cannot write one session: the second is told, and the first's turn is
/// stored whole.
#[test]
fn a_session_open_in_another_process_is_refused() {
    let env = Env::new();
    let first = FakeModel::start([Reply::from(text_chunks(&["hello"]))]);
    assert_eq!(env.run(Some(&first), &["-p", "start"]).code, 0);
    let list = env.run(None, &["sessions", "--json"]);
    let id = serde_json::from_str::<Value>(list.stdout.lines().next().unwrap()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut slow_steps = vec![Step::Sleep(3000)];
    slow_steps.extend(text_chunks(&["slow answer"]));
    let slow = FakeModel::start([Reply::Stream(slow_steps)]);
    let holder = env
        .command(Some(&slow), &["-p", "--session", &id, "take your time"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    slow.wait_for_requests(1, std::time::Duration::from_secs(20));
    let second = FakeModel::start([Reply::from(text_chunks(&["never"]))]);
    let run = env.run(Some(&second), &["-p", "--session", &id, "me too"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("session {id} is open in another oml process")),
        "{run:?}"
    );
    assert!(second.requests().is_empty());
    let out = holder.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    // Once the first has finished, the session opens again, with both of its turns.
    let after = FakeModel::start([Reply::from(text_chunks(&["ok"]))]);
    assert_eq!(
        env.run(Some(&after), &["-p", "--session", &id, "now"]).code,
        0
    );
    let users: Vec<String> = after.requests()[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(users, ["start", "take your time", "now"]);
}

/// A session that cannot be stored is an error the user sees, not a conversation silently kept
/// in memory only; `--no-session` still works.
#[test]
fn a_session_that_cannot_be_stored_says_so() {
    let env = Env::new();
    let sessions = env.root.join("state/oml/sessions");
    std::fs::create_dir_all(sessions.parent().unwrap()).unwrap();
    std::fs::write(&sessions, "a file where the folder should be").unwrap();
    let fake = FakeModel::start([Reply::from(text_chunks(&["fine"]))]);
    let run = env.run(Some(&fake), &["-p", "hi"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "cannot store the session in {}",
            sessions.display()
        )),
        "{run:?}"
    );
    assert!(fake.requests().is_empty());
    let run = env.run(Some(&fake), &["-p", "--no-session", "hi"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "fine\n"), "{run:?}");
}

#[test]
fn a_closed_stdout_stops_print_mode_at_once_with_status_141() {
    use std::io::Read as _;
    let env = Env::new();
    // Text, a pause for the reader to go away, more text that finds the pipe closed, then a
    // stream that would hang for the rest of the fake's patience.
    let mut steps = text_chunks(&["first "]);
    steps.truncate(1);
    steps.push(Step::Sleep(300));
    steps.extend(text_chunks(&["second"]).into_iter().take(1));
    steps.push(Step::Hang);
    let fake = FakeModel::start([Reply::Stream(steps)]);
    let mut child = env
        .command(Some(&fake), &["-p", "talk"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oml");
    // `| head -c 1`: one byte read, then the pipe closed.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut byte = [0u8; 1];
    stdout.read_exact(&mut byte).expect("the first byte");
    drop(stdout);
    let status =
        support::home::wait_within(&mut child, support::home::DEADLINE).expect("oml stopped");
    assert_eq!(status.code(), Some(141));
    assert_eq!(
        fake.requests().len(),
        1,
        "no more model calls after stdout closed"
    );
}

#[test]
fn print_mode_help_lists_every_exit_status() {
    let env = Env::new();
    let run = env.run(None, &["-p", "--help"]);
    assert_eq!(run.code, 0, "{run:?}");
    for status in [
        "0 ", "1 ", "2 ", "3 ", "4 ", "5 ", "6 ", "130 ", "129, 143", "141 ",
    ] {
        assert!(run.stdout.contains(status), "{status}: {}", run.stdout);
    }
}

/// Every line of a JSON stream, parsed.
fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

/// Issue #26 item 8: `update_plan`'s schema describes a step (`{step, status}`, the status an
/// enum) under an argument named `steps`, which editors do not show as a proposed plan; plain
/// strings are pending steps, and the old `plan` argument still works.
#[test]
fn update_plan_describes_its_steps_and_takes_plain_strings() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks(
            "call_1",
            "update_plan",
            &[r#"{"steps": ["Read the code", "Fix the bug"]}"#],
        )),
        Reply::from(tool_call_chunks(
            "call_2",
            "update_plan",
            &[r#"{"plan": [{"step": "Read the code", "status": "completed"}]}"#],
        )),
        Reply::from(text_chunks(&["planned"])),
    ]);
    let run = env.run(Some(&fake), &["-p", "--json", "plan it"]);
    assert_eq!(run.code, 0, "{run:?}");
    let plans: Vec<Value> = json_lines(&run.stdout)
        .into_iter()
        .filter(|l| l["type"] == "plan")
        .map(|l| l["entries"].clone())
        .collect();
    let entry = |content: &str, status: &str| json!({"content": content, "priority": "medium", "status": status});
    assert_eq!(
        plans,
        [
            json!([
                entry("Read the code", "pending"),
                entry("Fix the bug", "pending")
            ]),
            json!([entry("Read the code", "completed")]),
        ],
        "{run:?}"
    );
    let body = &fake.requests()[0].body;
    let spec = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "update_plan")
        .expect("update_plan is offered");
    let params = &spec["function"]["parameters"];
    assert_eq!(params["required"], json!(["steps"]), "{params}");
    assert!(params["properties"].get("plan").is_none(), "{params}");
    assert_eq!(params["properties"]["steps"]["type"], "array");
    let items = &params["properties"]["steps"]["items"];
    assert_eq!(items["required"], json!(["step", "status"]), "{params}");
    assert_eq!(items["properties"]["step"]["type"], "string");
    assert_eq!(
        items["properties"]["status"],
        json!({"type": "string", "enum": ["pending", "in_progress", "completed"]})
    );
}

/// The fields docs/src/print-mode.md documents for each `type` of the JSON stream: the names in
/// code spans of a row's Fields cell, outside parentheses.
fn documented_fields() -> BTreeMap<String, BTreeSet<String>> {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/print-mode.md"),
    )
    .unwrap();
    let section = &page[page
        .find("## The JSON stream")
        .expect("the JSON stream section")..];
    let mut out = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let kind = cells[0]
            .trim_start_matches("| ")
            .trim_matches('`')
            .to_owned();
        if kind == "type" {
            continue; // the header row
        }
        let (mut depth, mut span, mut in_code) = (0, String::new(), false);
        let mut fields = BTreeSet::new();
        for c in cells[2].chars() {
            match c {
                '`' if in_code => {
                    in_code = false;
                    let plain = span.chars().all(|c| c.is_ascii_lowercase() || c == '_');
                    if depth == 0 && plain && !span.is_empty() {
                        fields.insert(span.clone());
                    }
                }
                '`' => {
                    in_code = true;
                    span.clear();
                }
                _ if in_code => span.push(c),
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
        }
        fields.insert("type".to_owned());
        out.insert(kind, fields);
    }
    out
}

/// Every object key in `value`, at any depth, with the path it is at; the values of `args`
/// and of the provider's `usage` are not oml's and are skipped.
fn keys(value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                out.push(format!("{at}.{k}"));
                let foreign = k == "args" || (k == "usage" && at == "usage");
                if !foreign {
                    keys(v, &format!("{at}.{k}"), out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| keys(v, at, out)),
        _ => {}
    }
}

/// Issue #26 item 11: every line of the JSON stream speaks JSON's conventions: snake_case keys
/// at every depth, snake_case types, ACP's stop reason, token counts named as `claude -p` names
/// them; and each type has exactly the fields docs/src/print-mode.md lists.
#[test]
fn every_json_event_has_snake_case_keys_and_the_documented_fields() {
    let env = Env::new();
    env.init("(setq llm.retry-base-delay 0.01)");
    let mut thinking_write = reasoning_chunks("reasoning_content", &["Hmm."]);
    thinking_write.extend(tool_call_chunks(
        "call_1",
        "write",
        &[r#"{"path": "a.txt", "content": "x\n"}"#],
    ));
    thinking_write.push(usage_chunk(10, 2));
    let fake = FakeModel::start([
        Reply::error(503, "busy"),
        Reply::from(thinking_write),
        Reply::from(tool_call_chunks(
            "call_2",
            "update_plan",
            &[r#"{"steps": ["Write a.txt"]}"#],
        )),
        Reply::from(tool_call_chunks(
            "call_3",
            "bash",
            &[r#"{"command": "cat a.txt"}"#],
        )),
        Reply::from(text_chunks(&["Done."])),
    ]);
    let run = env.run(Some(&fake), &["-p", "--json", "--mode", "yolo", "write it"]);
    assert_eq!(run.code, 0, "{run:?}");
    let mut lines = json_lines(&run.stdout);
    let command_end = lines
        .iter()
        .find(|l| l["type"] == "tool_end" && l["id"] == "call_3")
        .expect("the command's end");
    assert_eq!(command_end["exit"], json!({"code": 0}), "{command_end}");
    let failed = env.run(
        Some(&FakeModel::start([Reply::error(400, "bad request")])),
        &["-p", "--json", "again"],
    );
    assert_eq!(failed.code, 3, "{failed:?}");
    lines.extend(json_lines(&failed.stdout));

    let documented = documented_fields();
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let snake = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    for line in &lines {
        let kind = line["type"].as_str().expect("a type").to_owned();
        assert!(snake(&kind), "type {kind} is not snake_case: {line}");
        let mut all = Vec::new();
        keys(line, &kind, &mut all);
        for key in &all {
            let last = key.rsplit('.').next().unwrap();
            assert!(snake(last), "{key} is not snake_case: {line}");
        }
        let fields = line.as_object().unwrap().keys().cloned();
        seen.entry(kind).or_default().extend(fields);
    }
    assert_eq!(
        seen, documented,
        "the stream's fields against print-mode.md"
    );
    let result = lines.iter().find(|l| l["type"] == "result").unwrap();
    assert_eq!(result["schema"], 2);
    assert_eq!(result["stop_reason"], "end_turn");
    assert_eq!(
        result["usage"],
        json!({"input_tokens": 10, "output_tokens": 2,
               "cache_read_tokens": 0, "cache_write_tokens": 0})
    );
    assert_eq!(result["cost"], Value::Null, "no llm.prices, no cost");
    assert_eq!(lines.last().unwrap()["stop_reason"], "error");
}

#[test]
fn print_mode_has_nobody_to_ask_so_the_model_gets_no_ask_user_tool() {
    let env = Env::new();
    env.init("(fn commands.who [input] \"Ask the user.\" (let [(a why) (ask-user {:message \"?\" :schema {}})] (.. (tostring a) \"/\" why)))");
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["decided"]))]);
    let run = env.run(Some(&fake), &["-p", "go"]);
    assert_eq!(run.code, 0, "{run:?}");
    let tools: Vec<String> = fake.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(!tools.contains(&"ask_user".to_owned()), "{tools:?}");
    let asked = env.run(Some(&fake), &["-p", "/who"]);
    assert!(
        asked.stdout.contains("nil/there is nobody to ask here"),
        "{asked:?}"
    );
}
