//! The agent loop end to end: the real `oml -p` binary against the fake model server, with fresh
//! XDG and HOME directories per test. Each test names the behaviour it checks.

mod support;

use std::process::Stdio;

use serde_json::{Value, json};
use support::fake_model::{FakeModel, Reply, Step, delta_chunk, text_chunks, tool_call_chunks};
use support::home::{Env, Run};
use support::model::*;

// --- the loop

#[test]
fn read_then_answer() {
    let env = Env::new();
    env.file("notes.txt", "hello\n");
    let fake = FakeModel::start(replies(vec![
        tool_call_chunks("call_1", "read", &[r#"{"path":"#, r#""notes.txt"}"#]),
        text_chunks(&["The note ", "says hello."]),
    ]));
    let run = env.run(Some(&fake), &["-p", "What does notes.txt say?"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "> read: Read notes.txt\n  ok:      1\thello\nThe note says hello.\n"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0].body;
    assert_eq!(roles(first), ["system", "user"]);
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains(&format!(
            "The working directory is {}.",
            env.project.display()
        )),
        "{system}"
    );
    assert_eq!(
        tool_names(first),
        [
            "bash",
            "edit",
            "find",
            "grep",
            "ls",
            "read",
            "task",
            "task_output",
            "task_stop",
            "update_plan",
            "write"
        ]
    );
    let second = &requests[1].body;
    assert_eq!(roles(second), ["system", "user", "assistant", "tool"]);
    let tool = &tool_messages(second)[0];
    assert_eq!(tool["tool_call_id"], "call_1");
    assert_eq!(tool["content"], "     1\thello");
    assert_eq!(
        second["messages"][2]["tool_calls"][0]["function"]["name"],
        "read"
    );
}

#[test]
fn tool_errors_go_back_to_the_model() {
    let env = Env::new();
    let fake = FakeModel::start(replies(vec![
        tool_calls(&[
            ("c1", "nope", "{}"),
            ("c2", "read", "{bad json"),
            ("c3", "read", r#"{"path": "missing.txt"}"#),
            ("c4", "read", "[1, 2]"),
        ]),
        text_chunks(&["ok"]),
    ]));
    let run = env.run(Some(&fake), &["-p", "go"]);
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "the loop continues after tool errors");
    let tools = tool_messages(&requests[1].body);
    let contents: Vec<&str> = tools
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents[0], "Unknown tool: nope");
    assert!(contents[1].contains("json.decode"), "{contents:?}");
    assert_eq!(
        contents[2],
        format!(
            "File not found: {}",
            env.project.join("missing.txt").display()
        )
    );
    assert_eq!(contents[3], "tool arguments must be a JSON object");
    assert_eq!(run.stdout.matches("  failed: ").count(), 4, "{run:?}");
}

#[test]
fn stops_at_max_turns_after_running_the_last_tools() {
    let env = Env::new();
    env.init(
        r#"(setq agent.max-turns 3)
(advise! agent.run :last-role
  (fn [run] (let [r (run) t (session.transcript)] (log (.. "last-role " (. t (length t) :role))) r)))"#,
    );
    let call = || tool_call_chunks("c", "bash", &[r#"{"command": "echo hi"}"#]);
    let fake = FakeModel::start(replies(vec![call(), call(), call(), text_chunks(&["no"])]));
    let run = env.run(Some(&fake), &["-p", "loop"]);
    assert_eq!(
        run.code, 4,
        "the turn limit has its own exit status: {run:?}"
    );
    assert_eq!(fake.requests().len(), 3);
    assert_eq!(run.stdout.matches("  ok: hi").count(), 3, "{run:?}");
    assert!(run.stderr.contains("[stopped: max-turns]"), "{run:?}");
    assert!(run.stderr.contains("last-role tool"), "{run:?}");
}

#[test]
fn a_length_stop_is_max_tokens() {
    let env = Env::new();
    let fake = FakeModel::start(replies(vec![vec![
        Step::Chunk(delta_chunk(json!({"content": "cut"}), None)),
        Step::Chunk(delta_chunk(json!({}), Some("length"))),
    ]]));
    let run = env.run(Some(&fake), &["-p", "long"]);
    assert_eq!(
        run.code, 5,
        "the output limit has its own exit status: {run:?}"
    );
    assert!(run.stderr.contains("[stopped: max-tokens]"), "{run:?}");
}

#[test]
fn a_redefinition_in_the_init_file_changes_the_request() {
    let env = Env::new();
    env.init(
        r#"(fn agent.system-prompt [] "Terse." "You are terse.")
(fn agent.tool-result-message [call result]
  {:role :tool :tool_call_id call.id
   :content (.. (if result.error? "ERROR: " "") result.content)})"#,
    );
    let fake = FakeModel::start(replies(vec![
        tool_call_chunks("c1", "nope", &["{}"]),
        text_chunks(&["ok"]),
    ]));
    let run = env.run(Some(&fake), &["-p", "hi"]);
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    assert_eq!(requests[0].body["messages"][0]["content"], "You are terse.");
    assert_eq!(
        tool_messages(&requests[1].body)[0]["content"],
        "ERROR: Unknown tool: nope"
    );
}

#[test]
fn advice_on_session_emit_sees_every_streamed_delta() {
    // Unadvised, deltas reach the session without a call into Lisp each; advised, every one goes
    // through the advice, as the name says.
    let shout = r#"(advise! session.emit! :shout
  (fn [emit event ...]
    (when (= event.type :text-delta) (set event.text (event.text:upper)))
    (emit event ...)))"#;
    for (init, expected) in [
        ("", "hello streamed world"),
        (shout, "HELLO STREAMED WORLD"),
    ] {
        let env = Env::new();
        env.init(init);
        let fake = FakeModel::start(replies(vec![text_chunks(&[
            "hello",
            " streamed",
            " world",
        ])]));
        let run = env.run(Some(&fake), &["-p", "hi"]);
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(run.stdout.trim_end(), expected, "{run:?}");
    }
}

#[test]
fn a_delta_forwarder_emits_only_deltas_through_session_emit() {
    let env = Env::new();
    env.init(
        r#"(var seen [])
(advise! session.emit! :record (fn [emit event ...] (table.insert seen event.type) (emit event ...)))
(fn commands.forward []
  "Feed a forwarder some events."
  (let [f (session.delta-forwarder (session.current))]
    (f {:type :text-delta :text "a"})
    (f {:type :tool-call :id "x"})
    (f {:type :thought-delta :text "b"})
    (session.say (.. " " (table.concat seen ","))))
  nil)"#,
    );
    let run = env.run(None, &["-p", "/forward"]);
    assert_eq!(run.code, 0, "{run:?}");
    // "a" is the forwarded text; the list is what session.emit! saw before the `say`.
    assert_eq!(
        run.stdout.trim_end(),
        "a text-delta,thought-delta",
        "the forwarder passes the two deltas on and drops the tool call: {run:?}"
    );
}

#[test]
fn advice_on_execute_tool_is_a_permission_policy() {
    let env = Env::new();
    env.init(
        r#"(advise! agent.execute-tool :no-rm-rf
  (fn [execute call]
    (if (and (= call.name "bash") (call.args.command:find "rm %-rf"))
        {:content "Blocked: rm -rf is not allowed here" :error? true}
        (execute call))))
(advise! agent.call-model :log
  (fn [call-model request]
    (log (.. "model call: " (length request.messages) " messages, " (length request.tools) " tools"))
    (call-model request)))"#,
    );
    let fake = FakeModel::start(replies(vec![
        tool_call_chunks("c1", "bash", &[r#"{"command": "rm -rf /tmp/x"}"#]),
        text_chunks(&["fine"]),
    ]));
    let run = env.run(Some(&fake), &["-p", "clean up"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("[oml] model call: 2 messages, 11 tools"),
        "{run:?}"
    );
    assert_eq!(
        tool_messages(&fake.requests()[1].body)[0]["content"],
        "Blocked: rm -rf is not allowed here"
    );
}

#[test]
fn a_tool_schema_comes_from_destructuring_and_params() {
    let env = Env::new();
    env.init(
        r#"(fn tools.word-count [{: path : limit : mode}]
  {:fnl/docstring "Count the words
in a text file." :kind :read :title "Count {path}"
   :params {:path [:string "File path"] :limit [:integer "Stop here" :optional] :extra [:boolean "More"]}}
  (let [text (or (oml.read-file (session.resolve-path path)) "")]
    (var n 0)
    (each [_ (text:gmatch "%S+")] (set n (+ n 1)))
    (tostring n)))
(fn tools.boom [{: x}] "Always fails." (error "boom" 0))
(fn tools.hidden [x] x)"#,
    );
    env.file("words.txt", "one two three\n");
    let fake = FakeModel::start(replies(vec![
        tool_calls(&[
            ("c1", "word-count", r#"{"path": "words.txt"}"#),
            ("c2", "boom", r#"{"x": "1"}"#),
        ]),
        text_chunks(&["3"]),
    ]));
    let run = env.run(Some(&fake), &["-p", "count"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("> word-count: Count words.txt\n  ok: 3\n"),
        "{run:?}"
    );
    let requests = fake.requests();
    let body = &requests[0].body;
    assert_eq!(
        tool_names(body),
        [
            "bash",
            "boom",
            "edit",
            "find",
            "grep",
            "ls",
            "read",
            "task",
            "task_output",
            "task_stop",
            "update_plan",
            "word-count",
            "write"
        ]
    );
    let spec = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "word-count")
        .unwrap();
    assert_eq!(
        spec["function"]["description"],
        "Count the words in a text file."
    );
    let params = &spec["function"]["parameters"];
    assert_eq!(params["type"], "object");
    assert_eq!(
        params["properties"]["path"],
        json!({"type": "string", "description": "File path"})
    );
    assert_eq!(
        params["properties"]["limit"],
        json!({"type": "integer", "description": "Stop here"})
    );
    assert_eq!(params["properties"]["mode"], json!({"type": "string"}));
    assert_eq!(
        params["properties"]["extra"],
        json!({"type": "boolean", "description": "More"})
    );
    let mut required: Vec<&str> = params["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort();
    assert_eq!(required, ["extra", "mode", "path"]);
    let tools = tool_messages(&requests[1].body);
    assert_eq!(tools[0]["content"], "3");
    assert_eq!(tools[1]["content"], "boom");
}

#[test]
fn a_multi_edit_goes_through_the_loop() {
    let env = Env::new();
    let file = env.file("a.txt", "alpha\nbeta\ngamma\n");
    let fake = FakeModel::start(replies(vec![
        tool_call_chunks(
            "c1",
            "edit",
            &[
                r#"{"path": "a.txt", "edits": [{"old_text": "alpha", "new_text": "ALPHA"}, {"old_text": "gamma", "new_text": "GAMMA"}]}"#,
            ],
        ),
        text_chunks(&["edited"]),
    ]));
    let run = env.run(Some(&fake), &["-p", "shout"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "ALPHA\nbeta\nGAMMA\n"
    );
    let content = tool_messages(&fake.requests()[1].body)[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        content.starts_with(&format!("Edited {}", file.display())),
        "{content}"
    );
}

// --- permission modes in print mode

fn permission_run(mode: Option<&str>, tool: &str, args: &str) -> (Env, Run, Vec<Value>) {
    let env = Env::new();
    let fake = FakeModel::start(replies(vec![
        tool_call_chunks("c1", tool, &[args]),
        text_chunks(&["done"]),
    ]));
    let mut argv = vec!["-p", "do it"];
    if let Some(mode) = mode {
        // The mode, and any further flags after it.
        argv.push("--mode");
        argv.extend(mode.split(' '));
    }
    let run = env.run(Some(&fake), &argv);
    let tools = tool_messages(&fake.requests()[1].body);
    (env, run, tools)
}

#[test]
fn print_mode_defaults_to_accept_edits_with_sandboxed_commands() {
    let (env, run, tools) = permission_run(None, "write", r#"{"path": "w.txt", "content": "x"}"#);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        tools[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Wrote 1 byte")
    );
    assert!(env.project.join("w.txt").exists());
    // `oml -p "run the tests"` works: the command runs, confined to the project.
    // Not in the project and not in the temp dir (`/tmp`, where the test's home is).
    let outside = std::path::PathBuf::from(format!("/var/tmp/oml-test-{}.txt", std::process::id()));
    let command = format!("echo ran; touch {}", outside.display());
    let args = serde_json::json!({ "command": command }).to_string();
    let (_, run, tools) = permission_run(None, "bash", &args);
    assert_eq!(run.code, 0, "{run:?}");
    let content = tools[0]["content"].as_str().unwrap();
    assert!(
        content.starts_with("ran\n")
            && (content.contains("Permission denied") || content.contains("Read-only file system")),
        "{content}"
    );
    assert!(!outside.exists());
}

#[test]
fn read_only_refuses_writes_and_commands() {
    let (env, run, tools) = permission_run(
        Some("read-only"),
        "write",
        r#"{"path": "w.txt", "content": "x"}"#,
    );
    assert_eq!(run.code, 0, "{run:?}");
    let content = tools[0]["content"].as_str().unwrap();
    assert!(
        content.starts_with("Blocked: the session is read-only"),
        "{content}"
    );
    assert!(!env.project.join("w.txt").exists());
    let (_, _, tools) = permission_run(Some("read-only"), "bash", r#"{"command": "echo hi"}"#);
    assert!(
        tools[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Blocked:")
    );
}

#[test]
fn ask_refuses_when_print_mode_cannot_ask() {
    let (env, run, tools) =
        permission_run(Some("ask"), "write", r#"{"path": "w.txt", "content": "x"}"#);
    assert_eq!(run.code, 0, "{run:?}");
    let content = tools[0]["content"].as_str().unwrap();
    assert!(content.contains("cannot ask"), "{content}");
    assert!(!env.project.join("w.txt").exists());
    let (_, _, tools) = permission_run(Some("ask"), "read", r#"{"path": "nothing"}"#);
    assert!(
        tools[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("File not found")
    );
}

#[test]
fn accept_edits_runs_edits_and_sandboxed_commands_and_asks_for_unconfined_ones() {
    let (env, _, tools) = permission_run(
        Some("accept-edits"),
        "write",
        r#"{"path": "w.txt", "content": "x"}"#,
    );
    assert!(tools[0]["content"].as_str().unwrap().starts_with("Wrote"));
    assert!(env.project.join("w.txt").exists());
    // Confined (the default sandbox), a command runs without a question.
    let (_, _, tools) = permission_run(Some("accept-edits"), "bash", r#"{"command": "echo hi"}"#);
    assert_eq!(tools[0]["content"], "hi");
    // Unconfined, it needs a question, which print mode cannot ask.
    let (_, _, tools) = permission_run(
        Some("accept-edits --sandbox off"),
        "bash",
        r#"{"command": "echo hi"}"#,
    );
    assert!(tools[0]["content"].as_str().unwrap().contains("cannot ask"));
}

#[test]
fn yolo_runs_commands() {
    let (_, _, tools) = permission_run(Some("yolo"), "bash", r#"{"command": "echo hi"}"#);
    assert_eq!(tools[0]["content"], "hi");
}

// --- commands

#[test]
fn commands_never_call_the_model() {
    let env = Env::new();
    let fake = FakeModel::start(Vec::<Reply>::new());
    let run = env.run(Some(&fake), &["-p", "/eval (+ 1 2)"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "3\n");
    let run = env.run(Some(&fake), &["-p", r#"/eval (print "hi") :done"#]);
    assert_eq!(run.stdout, "hi\ndone\n");
    let run = env.run(Some(&fake), &["-p", "/eval (error \"bad\" 0)"]);
    assert_eq!(run.stdout, "Error in /eval: bad\n");
    let run = env.run(Some(&fake), &["-p", "/doc agent.max-turns"]);
    assert!(run.stdout.contains("Value: 30"), "{run:?}");
    assert!(run.stdout.contains("src/agent/agent.fnl:"), "{run:?}");
    // Markdown a client can render: the signature as code, the source fenced.
    let run = env.run(Some(&fake), &["-p", "/doc agent.plan"]);
    assert!(
        run.stdout.starts_with("`(agent.plan ?session-id)`\n\n"),
        "{run:?}"
    );
    let run = env.run(Some(&fake), &["-p", "/source agent.plan"]);
    assert!(run.stdout.starts_with("src/agent/plan.fnl:"), "{run:?}");
    assert!(
        run.stdout.contains("\n\n```fennel\n(fn agent.plan"),
        "{run:?}"
    );
    assert!(run.stdout.trim_end().ends_with("```"), "{run:?}");
    let run = env.run(Some(&fake), &["-p", "/commands"]);
    for name in [
        "apropos", "commands", "doc", "eval", "model", "reload", "settings", "source", "tools",
        "usage",
    ] {
        assert!(
            run.stdout.contains(&format!("- `/{name}` ")),
            "{name}: {run:?}"
        );
    }
    let run = env.run(Some(&fake), &["-p", "/tools"]);
    assert!(
        run.stdout
            .contains("- `read` (tools.read) Read a text file."),
        "{run:?}"
    );
    let run = env.run(Some(&fake), &["-p", "/source stop-reason"]);
    assert!(run.stdout.contains("(fn agent.stop-reason"), "{run:?}");
    let run = env.run(Some(&fake), &["-p", "/usage"]);
    assert_eq!(run.stdout, "No model calls yet.\n");
    assert_eq!(fake.requests().len(), 0);
}

#[test]
fn an_unknown_command_goes_to_the_model() {
    let env = Env::new();
    let fake = FakeModel::start(replies(vec![text_chunks(&["sure"])]));
    let run = env.run(Some(&fake), &["-p", "/nope do it"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        fake.requests()[0].body["messages"][1]["content"],
        "/nope do it"
    );
}

#[test]
fn a_command_defined_in_the_init_file_runs() {
    let env = Env::new();
    env.init(r#"(fn commands.shout [input] "Shout it." (print "loud:") (input:upper))"#);
    let run = env.run(None, &["-p", "/shout hey"]);
    assert_eq!(run.stdout, "loud:\nHEY\n", "{run:?}");
}

#[test]
fn model_and_usage_are_per_session() {
    let env = Env::new();
    env.init(
        r#"(fn commands.both [input]
  "Switch the model, ask, and show usage."
  (print (commands.model "other/model"))
  (print (agent.complete "hi"))
  (commands.usage ""))"#,
    );
    let fake = FakeModel::start(replies(vec![vec![
        Step::Chunk(delta_chunk(json!({"content": "yo"}), None)),
        Step::Chunk(delta_chunk(json!({}), Some("stop"))),
        support::fake_model::usage_chunk(10, 2),
    ]]));
    let run = env.run(Some(&fake), &["-p", "/both"]);
    assert_eq!(
        run.stdout,
        "Model set to other/model for this session\nyo\n1 model calls, 10 prompt tokens, 2 completion tokens\n",
        "{run:?}"
    );
    let body = &fake.requests()[0].body;
    assert_eq!(body["model"], "other/model");
    assert_eq!(roles(body), ["system", "user"]);
    assert!(body.get("tools").is_none(), "complete offers no tools");
}

#[test]
fn call_tool_with_record_leaves_a_valid_pair() {
    let env = Env::new();
    env.file("n.txt", "note\n");
    env.init(
        r#"(fn commands.peek [input] "Read n.txt as the agent." (agent.call-tool :read {:path "n.txt"} {:record true}) nil)
(fn commands.then [input] "Peek, then ask." (commands.peek "") (agent.prompt "what now?") nil)"#,
    );
    let fake = FakeModel::start(replies(vec![text_chunks(&["seen"])]));
    let run = env.run(Some(&fake), &["-p", "/then"]);
    assert_eq!(run.code, 0, "{run:?}");
    let body = &fake.requests()[0].body;
    assert_eq!(roles(body), ["system", "assistant", "tool", "user"]);
    let call_id = body["messages"][1]["tool_calls"][0]["id"].as_str().unwrap();
    assert!(
        call_id.starts_with("call_") && call_id.len() == 29,
        "{call_id}"
    );
    assert_eq!(body["messages"][2]["tool_call_id"], call_id);
    assert!(body["messages"][1]["content"].is_null());
    assert_eq!(body["messages"][2]["content"], "     1\tnote");
}

// --- print mode

#[test]
fn usage_errors_exit_2() {
    let env = Env::new();
    assert_eq!(env.run(None, &["-p", "  "]).code, 2);
    assert_eq!(env.run(None, &["-p", "x", "--mode", "sometimes"]).code, 2);
}

#[test]
fn the_prompt_can_come_from_stdin_and_the_prompt_subcommand() {
    let env = Env::new();
    let fake = FakeModel::start(replies(vec![text_chunks(&["a"]), text_chunks(&["b"])]));
    let mut cmd = env.command(Some(&fake), &["-p", "-"]);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from stdin")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a\n");
    let run = env.run(Some(&fake), &["prompt", "two", "words"]);
    assert_eq!(run.stdout, "b\n", "{run:?}");
    let requests = fake.requests();
    assert_eq!(requests[0].body["messages"][1]["content"], "from stdin");
    assert_eq!(requests[1].body["messages"][1]["content"], "two words");
}

#[test]
fn a_model_error_fails_the_prompt_with_exit_3() {
    let env = Env::new();
    let fake = FakeModel::start(vec![Reply::error(400, "bad request body")]);
    let run = env.run(Some(&fake), &["-p", "hi"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("error: "), "{run:?}");
    assert!(run.stderr.contains("bad request body"), "{run:?}");
}

#[test]
fn json_mode_writes_one_event_per_line() {
    let env = Env::new();
    env.file("notes.txt", "hello\n");
    let mut answer = text_chunks(&["Hello", "."]);
    answer.insert(answer.len() - 1, support::fake_model::usage_chunk(120, 7));
    let fake = FakeModel::start(replies(vec![
        tool_call_chunks("call_1", "read", &[r#"{"path": "notes.txt"}"#]),
        answer,
    ]));
    let run = env.run(Some(&fake), &["-p", "read", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let stdout = run
        .stdout
        .replace(&env.project.display().to_string(), "<project>");
    // The session id and the duration differ from run to run.
    let stdout: Vec<String> = stdout
        .lines()
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).expect("each line is JSON");
            for (key, stable) in [("session", "<id>"), ("duration_ms", "<ms>")] {
                if v.get(key).is_some() {
                    v[key] = json!(stable);
                }
            }
            // The provider's usage object crosses Lisp, whose tables keep no key order.
            if let Some(usage) = v.get("usage").and_then(Value::as_object) {
                let sorted: std::collections::BTreeMap<_, _> = usage.clone().into_iter().collect();
                v["usage"] = json!(sorted);
            }
            v.to_string()
        })
        .collect();
    insta::assert_snapshot!(stdout.join("\n"));
}

#[test]
fn ctrl_c_cancels_the_turn_and_keeps_the_partial_text() {
    use std::io::Read as _;
    let env = Env::new();
    let fake = FakeModel::start(replies(vec![vec![
        Step::Chunk(delta_chunk(json!({"content": "partial"}), None)),
        Step::Hang,
    ]]));
    let mut cmd = env.command(Some(&fake), &["-p", "talk"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("partial") {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "stdout closed before the partial text");
        seen.extend_from_slice(&buf[..n]);
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    seen.extend(rest);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(String::from_utf8_lossy(&seen), "partial\n");
}
