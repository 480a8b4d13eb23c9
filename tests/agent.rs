//! The agent loop end to end: the real `oml -p` binary against the fake model server, with fresh
//! XDG and HOME directories per test. Each test names the behaviour it checks.

mod common;
mod support;

use std::process::Stdio;

use common::{Env, Run};
use serde_json::{Value, json};
use support::fake_model::{FakeModel, Reply, Step, delta_chunk, text_chunks, tool_call_chunks};

/// The roles of a recorded request's messages.
fn roles(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?").to_owned())
        .collect()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn tool_messages(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

/// One assistant message with several tool calls `(id, name, arguments)`.
fn tool_calls(calls: &[(&str, &str, &str)]) -> Vec<Step> {
    let list: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, name, args))| {
            json!({"index": i, "id": id, "type": "function",
                   "function": {"name": name, "arguments": args}})
        })
        .collect();
    vec![
        Step::Chunk(delta_chunk(
            json!({"role": "assistant", "content": null, "tool_calls": list}),
            None,
        )),
        Step::Chunk(delta_chunk(json!({}), Some("tool_calls"))),
    ]
}

fn replies(list: Vec<Vec<Step>>) -> Vec<Reply> {
    list.into_iter().map(Reply::Stream).collect()
}

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
        run.stderr.contains("[oml] model call: 2 messages, 8 tools"),
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
            .starts_with("Wrote 1 bytes")
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

// --- recipes (examples/lisp)

fn install_example(env: &Env, name: &str) {
    let dir = env.root.join("config/oml/lisp");
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/lisp")
        .join(name);
    std::fs::copy(src, dir.join(name)).unwrap();
}

#[test]
fn recipe_project_context_and_usage_totals() {
    let env = Env::new();
    install_example(&env, "project-context.fnl");
    install_example(&env, "usage.fnl");
    env.init(
        r#"(require :project-context)
(require :usage)
(fn commands.ask-twice [input] "Ask twice, then show the totals."
  (agent.complete "one") (agent.complete "two") (commands.tokens ""))"#,
    );
    env.file("AGENTS.md", "Always answer in French.\n");
    let answer = || {
        vec![
            Step::Chunk(delta_chunk(json!({"content": "oui"}), None)),
            Step::Chunk(delta_chunk(json!({}), Some("stop"))),
            support::fake_model::usage_chunk(10, 1),
        ]
    };
    let fake = FakeModel::start(replies(vec![answer(), answer(), answer()]));
    let run = env.run(Some(&fake), &["-p", "hello"]);
    assert_eq!(run.code, 0, "{run:?}");
    let system = fake.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.ends_with("\n\nProject instructions (AGENTS.md):\n\nAlways answer in French.\n"),
        "{system}"
    );
    let run = env.run(Some(&fake), &["-p", "/ask-twice"]);
    assert_eq!(
        run.stdout, "2 model calls, 20 prompt tokens, 2 completion tokens\n",
        "{run:?}"
    );
}

// --- stored sessions

#[test]
fn print_mode_continues_the_latest_session_here() {
    let env = Env::new();
    let fake = FakeModel::start(replies(vec![
        text_chunks(&["First answer."]),
        text_chunks(&["Second answer."]),
        text_chunks(&["Third answer."]),
        text_chunks(&["Fresh."]),
    ]));
    let run = env.run(Some(&fake), &["-p", "first question"]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = env.run(Some(&fake), &["-p", "second question", "--continue"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Second answer.\n");
    let requests = fake.requests();
    assert_eq!(
        roles(&requests[1].body),
        ["system", "user", "assistant", "user"]
    );
    assert_eq!(requests[1].body["messages"][1]["content"], "first question");

    // `oml sessions` lists it, titled by its first message; --session picks it by id.
    let list = env.run(None, &["sessions"]);
    assert_eq!(list.code, 0, "{list:?}");
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{list:?}");
    assert!(lines[0].ends_with("first question"), "{list:?}");
    let id = lines[0].split_whitespace().next().unwrap();
    let run = env.run(Some(&fake), &["-p", "third", "--session", id, "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains(&format!("\"session\":\"{id}\"")),
        "{run:?}"
    );
    assert_eq!(
        fake.requests()[2].body["messages"]
            .as_array()
            .unwrap()
            .len(),
        6
    );

    // --no-session stores nothing; an unknown id is an error.
    let run = env.run(Some(&fake), &["-p", "fresh", "--no-session"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(roles(&fake.requests()[3].body), ["system", "user"]);
    assert_eq!(env.run(None, &["sessions"]).stdout.lines().count(), 1);
    let run = env.run(Some(&fake), &["-p", "x", "--session", "s-nope"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("no stored session s-nope"), "{run:?}");
}

#[test]
fn openrouters_reasoning_details_go_back_unmodified_also_from_the_session_file() {
    let env = Env::new();
    env.file("notes.txt", "hello\n");
    env.init("(setq llm.provider :openrouter)\n");
    let items = [
        json!({"type": "reasoning.text", "text": "Read it.", "signature": null, "index": 0}),
        json!({"type": "reasoning.encrypted", "data": "opaque==", "id": "rs_1", "index": 1}),
    ];
    let mut first = vec![Step::Chunk(delta_chunk(
        json!({"reasoning": "Read it.", "reasoning_details": items}),
        None,
    ))];
    first.extend(tool_call_chunks(
        "call_1",
        "read",
        &[r#"{"path":"notes.txt"}"#],
    ));
    let fake = FakeModel::start(replies(vec![
        first,
        text_chunks(&["It says hello."]),
        text_chunks(&["Yes."]),
    ]));
    let run = env.run(Some(&fake), &["-p", "What do my notes say?"]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = env.run(Some(&fake), &["-p", "Sure?", "--continue"]);
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    assert_eq!(
        roles(&requests[2].body),
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    // The same prompt's next request, and the next prompt's, read from the session file.
    for request in &requests[1..] {
        let tool_turn = &request.body["messages"][2];
        assert_eq!(tool_turn["reasoning_details"], json!(items), "{tool_turn}");
        assert!(tool_turn.get("reasoning_content").is_none(), "{tool_turn}");
        assert!(tool_turn.get("reasoning").is_none(), "{tool_turn}");
    }
}

#[test]
fn compact_summarises_all_but_the_last_turn() {
    let env = Env::new();
    let fake = FakeModel::start(replies(vec![
        text_chunks(&["First answer."]),
        text_chunks(&["Second answer."]),
        text_chunks(&["THE SUMMARY"]),
        text_chunks(&["Next answer."]),
    ]));
    assert_eq!(env.run(Some(&fake), &["-p", "first question"]).code, 0);
    assert_eq!(
        env.run(Some(&fake), &["-p", "second question", "-c"]).code,
        0
    );
    let run = env.run(Some(&fake), &["-p", "/compact mention names", "-c"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout, "Compacted 2 messages into a summary.\n",
        "{run:?}"
    );
    let requests = fake.requests();
    let ask = requests[2].body["messages"][1]["content"].as_str().unwrap();
    assert!(ask.contains("[user] first question"), "{ask}");
    assert!(ask.contains("Also: mention names"), "{ask}");
    assert!(!ask.contains("second question"), "{ask}");
    assert_eq!(env.run(Some(&fake), &["-p", "next", "-c"]).code, 0);
    let body = &fake.requests()[3].body;
    assert_eq!(roles(body), ["system", "user", "user", "assistant", "user"]);
    assert_eq!(
        body["messages"][1]["content"],
        "Summary of the earlier conversation:\n\nTHE SUMMARY"
    );
    // The file keeps the whole history: the replaced messages, then the replacement.
    let dir = env.root.join("state/oml/sessions");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains("\"first question\""));
    assert!(text.contains("\"type\":\"transcript\""));
    assert!(text.contains("\"kind\":\"compaction\""));
}

#[test]
fn a_transcript_past_the_threshold_is_compacted_before_the_model_call() {
    let env = Env::new();
    env.init("(setq llm.context-window 100 agent.compact-at 0.45 agent.compact-keep 0.1)\n");
    let fake = FakeModel::start(replies(vec![
        text_chunks(&["First answer."]),
        text_chunks(&["Second answer."]),
        text_chunks(&["AUTO SUMMARY"]),
        text_chunks(&["Third answer."]),
    ]));
    assert_eq!(env.run(Some(&fake), &["-p", "first question"]).code, 0);
    assert_eq!(
        env.run(Some(&fake), &["-p", "second question", "-c"]).code,
        0
    );
    let run = env.run(
        Some(&fake),
        &["-p", "third question", "-c", "--show-thinking"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    // The pause is explained as reasoning, which --show-thinking prints before the answer.
    assert_eq!(
        run.stdout,
        "Compacting the conversation: it passed agent.compact-at of llm.context-window.\n\
         Third answer.\n",
        "{run:?}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 4);
    let ask = requests[2].body["messages"][1]["content"].as_str().unwrap();
    assert!(ask.contains("[user] second question"), "{ask}");
    assert_eq!(roles(&requests[3].body), ["system", "user", "user"]);
    assert_eq!(requests[3].body["messages"][2]["content"], "third question");
}

/// Run `oml -p` over a fake model that calls each of CALLS (tool name, JSON arguments) in turn,
/// then answers; returns what the model read back for each call.
fn tool_results(env: &Env, path: Option<&std::ffi::OsStr>, calls: &[(&str, &str)]) -> Vec<String> {
    let mut list: Vec<Vec<Step>> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| tool_call_chunks(&format!("call_{i}"), name, &[args]))
        .collect();
    list.push(text_chunks(&["done"]));
    let fake = FakeModel::start(replies(list));
    let mut cmd = env.command(Some(&fake), &["-p", "search"]);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let run = Run::from(cmd.output().expect("run oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    (1..=calls.len())
        .map(|i| {
            let msgs = requests[i].body["messages"].as_array().unwrap();
            let last = msgs.last().unwrap();
            assert_eq!(last["role"], "tool");
            last["content"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// A directory holding only a link to the system's grep: a PATH without rg.
fn path_without_rg(env: &Env) -> std::ffi::OsString {
    let bin = env.root.join("bin-grep-only");
    std::fs::create_dir_all(&bin).unwrap();
    let grep = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("grep"))
        .find(|p| p.is_file())
        .expect("grep on PATH");
    std::os::unix::fs::symlink(grep, bin.join("grep")).unwrap();
    bin.into_os_string()
}

fn search_tree(env: &Env) {
    install_example(env, "search-tools.fnl");
    env.init("(require :search-tools)");
    for d in ["src/lib", ".hidden", "empty"] {
        std::fs::create_dir_all(env.project.join(d)).unwrap();
    }
    env.file("a.txt", "hello\nworld\n");
    env.file("top.rs", "fn top() {}\n");
    env.file("src/main.rs", "fn main() {}\n// hello there\n");
    env.file("src/lib/x.rs", "pub fn x() {}\n");
    env.file(".hidden/h.rs", "hello hidden\n");
    env.file(".env", "SECRET=1\n");
}

#[test]
fn recipe_search_tools_ls_and_find() {
    let env = Env::new();
    search_tree(&env);
    let out = tool_results(
        &env,
        None,
        &[
            ("ls", "{}"),
            ("ls", r#"{"path": "src"}"#),
            ("ls", r#"{"path": "empty"}"#),
            ("ls", r#"{"path": "a.txt"}"#),
            ("find", r#"{"pattern": "**/*.rs"}"#),
            ("find", r#"{"pattern": "*.rs"}"#),
            ("find", r#"{"pattern": "*.rs", "path": "src/lib"}"#),
            ("find", r#"{"pattern": "{a,top}.*"}"#),
            ("find", r#"{"pattern": "**/*.py"}"#),
        ],
    );
    assert_eq!(
        out,
        [
            ".env\n.hidden/\na.txt\nempty/\nsrc/\ntop.rs",
            "lib/\nmain.rs",
            "(empty)",
            "Not a directory: a.txt",
            "src/lib/x.rs\nsrc/main.rs\ntop.rs",
            "top.rs",
            "x.rs",
            "a.txt\ntop.rs",
            "No files found.",
        ]
    );
}

#[test]
fn recipe_search_tools_grep_falls_back_to_grep_without_rg() {
    let env = Env::new();
    search_tree(&env);
    let lines: String = (1..=250).map(|i| format!("needle {i}\n")).collect();
    env.file("many.txt", &lines);
    env.file("long.txt", &format!("needle {}\n", "x".repeat(400)));
    let path = path_without_rg(&env);
    let out = tool_results(
        &env,
        Some(&path),
        &[
            ("grep", r#"{"pattern": "hel+o"}"#),
            ("grep", r#"{"pattern": "hello", "glob": "*.rs"}"#),
            ("grep", r#"{"pattern": "nothing-matches"}"#),
            ("grep", r#"{"pattern": "x", "path": "missing"}"#),
            ("grep", r#"{"pattern": "needle"}"#),
        ],
    );
    // grep -r does not skip hidden files; ripgrep does.
    assert_eq!(
        out[0],
        ".hidden/h.rs:1:hello hidden\na.txt:1:hello\nsrc/main.rs:2:// hello there"
    );
    assert_eq!(
        out[1],
        ".hidden/h.rs:1:hello hidden\nsrc/main.rs:2:// hello there"
    );
    assert_eq!(out[2], "No matches.");
    assert!(
        out[3].starts_with("grep failed: grep: missing: No such file"),
        "{}",
        out[3]
    );
    let lines: Vec<&str> = out[4].lines().collect();
    assert_eq!(lines.len(), 201);
    assert_eq!(
        lines[0],
        format!("long.txt:1:needle {}...", "x".repeat(300 - 18))
    );
    assert_eq!(lines[1], "many.txt:1:needle 1");
    assert_eq!(lines[199], "many.txt:199:needle 199");
    assert_eq!(lines[200], "[51 more lines; narrow the search]");
}

#[test]
fn recipe_search_tools_grep_uses_rg_when_on_path() {
    let env = Env::new();
    search_tree(&env);
    let bin = env.root.join("bin-rg");
    std::fs::create_dir_all(&bin).unwrap();
    let log = env.root.join("rg-args");
    let rg = bin.join("rg");
    std::fs::write(
        &rg,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\necho 'src/main.rs:2:// hello there'\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&rg, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let out = tool_results(
        &env,
        Some(&path),
        &[(
            "grep",
            r#"{"pattern": "hello", "glob": "*.rs", "path": "src"}"#,
        )],
    );
    assert_eq!(out, ["src/main.rs:2:// hello there"]);
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "-n\n--no-heading\n--color=never\n-g\n*.rs\n-e\nhello\nsrc\n"
    );
}

#[test]
fn recipe_permissions_blocks_a_write_in_print_mode() {
    let env = Env::new();
    install_example(&env, "permissions.fnl");
    env.init("(require :permissions)");
    env.file("a.txt", "hello\n");
    let out = tool_results(
        &env,
        None,
        &[
            ("write", r#"{"path": "new.txt", "content": "x"}"#),
            ("read", r#"{"path": "a.txt"}"#),
        ],
    );
    assert_eq!(
        out[0],
        "Blocked: nobody can be asked whether write may run here (print mode), so it counts as \
         rejected"
    );
    assert!(out[1].contains("hello"), "{}", out[1]);
    assert!(!env.project.join("new.txt").exists());
}

#[test]
fn recipe_permissions_follows_the_answers_and_remembers_always() {
    let env = Env::new();
    install_example(&env, "permissions.fnl");
    env.init(
        r#"(require :permissions)
(local answers [:allow-once :reject-always :allow-always :reject-once :cancelled])
(set agent.ask-permission (fn [call] (table.remove answers 1)))"#,
    );
    env.file("a.txt", "one\n");
    let out = tool_results(
        &env,
        None,
        &[
            ("bash", r#"{"command": "echo ran"}"#),
            ("write", r#"{"path": "w.txt", "content": "x"}"#),
            ("write", r#"{"path": "w.txt", "content": "x"}"#),
            (
                "edit",
                r#"{"path": "a.txt", "old_text": "one", "new_text": "two"}"#,
            ),
            (
                "edit",
                r#"{"path": "a.txt", "old_text": "two", "new_text": "three"}"#,
            ),
            ("bash", r#"{"command": "echo ran"}"#),
            ("bash", r#"{"command": "echo ran"}"#),
            ("read", r#"{"path": "a.txt"}"#),
        ],
    );
    assert_eq!(out[0].trim(), "ran");
    assert_eq!(out[1], "Blocked: the user rejected it");
    assert_eq!(out[2], "Blocked: the user always rejects write");
    assert!(!out[3].starts_with("Blocked"), "{}", out[3]);
    assert!(!out[4].starts_with("Blocked"), "{}", out[4]);
    assert_eq!(out[5], "Blocked: the user rejected it");
    assert_eq!(
        out[6],
        "Blocked: the prompt was cancelled before the user answered"
    );
    assert!(out[7].contains("three"), "{}", out[7]);
    assert!(!env.project.join("w.txt").exists());
    // The remembered write and edit were not asked again: a sixth question would have had no
    // answer (nil), which blocks.
    assert_eq!(
        std::fs::read_to_string(env.project.join("a.txt")).unwrap(),
        "three\n"
    );
}

/// The role and content of each message of a recorded request, after the system prompt.
fn shape(body: &Value) -> Vec<String> {
    body["messages"].as_array().unwrap()[1..]
        .iter()
        .map(|m| {
            let content = m["content"].as_str().unwrap_or("");
            match m["tool_calls"].as_array() {
                Some(calls) => format!(
                    "{}: {content}[{}]",
                    m["role"].as_str().unwrap(),
                    calls[0]["function"]["name"].as_str().unwrap()
                ),
                None => format!("{}: {content}", m["role"].as_str().unwrap()),
            }
        })
        .collect()
}

#[test]
fn recipe_plan_review_plans_executes_and_reviews() {
    let env = Env::new();
    install_example(&env, "plan-review.fnl");
    env.init("(require :plan-review)");
    let fake = FakeModel::start(replies(vec![
        text_chunks(&["1. write a.txt"]),
        tool_call_chunks("call_1", "write", &[r#"{"path": "a.txt", "content": "a"}"#]),
        text_chunks(&["wrote a.txt"]),
        text_chunks(&["b.txt is missing"]),
        text_chunks(&["nothing else to do"]),
        text_chunks(&["DONE"]),
    ]));
    let run = env.run(Some(&fake), &["-p", "make a.txt and b.txt"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        format!(
            "1. write a.txt\n\n> write: Write a.txt\n  ok: Wrote 1 bytes to {}/a.txt\nwrote \
             a.txt\n\nNot done yet: b.txt is missing\n\nnothing else to do\n",
            env.project.display()
        ),
        "{run:?}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 6);
    let with_tools: Vec<bool> = requests
        .iter()
        .map(|r| !tool_names(&r.body).is_empty())
        .collect();
    assert_eq!(with_tools, [false, true, true, false, true, false]);
    let plan_q = "user: Before doing anything, write a short numbered plan for the request above. \
                  Do not carry it out yet.";
    let review_q = "user: Review the work above against the request. If it is complete, answer \
                    exactly DONE. Otherwise list what is missing.";
    assert_eq!(
        shape(&requests[0].body),
        ["user: make a.txt and b.txt", plan_q]
    );
    let executed = [
        "user: make a.txt and b.txt",
        "assistant: 1. write a.txt",
        "user: Carry out the plan.",
    ];
    assert_eq!(shape(&requests[1].body), executed);
    let mut reviewed: Vec<String> = executed.iter().map(|s| s.to_string()).collect();
    reviewed.extend([
        "assistant: [write]".to_owned(),
        format!("tool: Wrote 1 bytes to {}/a.txt", env.project.display()),
        "assistant: wrote a.txt".to_owned(),
    ]);
    let mut review1 = reviewed.clone();
    review1.push(review_q.to_owned());
    assert_eq!(shape(&requests[3].body), review1);
    reviewed.push("user: Not done yet: b.txt is missing".to_owned());
    assert_eq!(shape(&requests[4].body), reviewed);
    assert_eq!(shape(&requests[5].body).last().unwrap(), review_q);
}

#[test]
fn recipe_plan_review_stops_after_max_reviews_and_unadvise_restores_the_loop() {
    let env = Env::new();
    install_example(&env, "plan-review.fnl");
    env.init("(require :plan-review)");
    let fake = FakeModel::start(replies(vec![
        text_chunks(&["plan"]),
        text_chunks(&["did 1"]),
        text_chunks(&["missing 1"]),
        text_chunks(&["did 2"]),
        text_chunks(&["missing 2"]),
        text_chunks(&["did 3"]),
    ]));
    let run = env.run(Some(&fake), &["-p", "task"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(fake.requests().len(), 6, "two reviews, then stop");
    let last = shape(&fake.requests()[5].body);
    assert_eq!(last.last().unwrap(), "user: Not done yet: missing 2");

    env.init("(require :plan-review)\n(unadvise! agent.run :plan-review)");
    let fake = FakeModel::start(replies(vec![text_chunks(&["plain"])]));
    let run = env.run(Some(&fake), &["-p", "task"]);
    assert_eq!(run.stdout, "plain\n", "{run:?}");
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(shape(&fake.requests()[0].body), ["user: task"]);
}

#[test]
fn a_context_length_error_compacts_once_and_retries_once_and_resuming_keeps_the_compaction() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::from(text_chunks(&["First answer."])),
        Reply::error(
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}"#,
        ),
        Reply::from(text_chunks(&["EARLIER SUMMARY"])),
        Reply::from(text_chunks(&["Second answer."])),
        Reply::from(text_chunks(&["Third answer."])),
    ]);
    assert_eq!(env.run(Some(&fake), &["-p", "first question"]).code, 0);
    let run = env.run(
        Some(&fake),
        &["-p", "second question", "-c", "--show-thinking"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "Compacting the conversation: the model refused it as longer than its context.\n\
         Second answer.\n",
        "{run:?}"
    );
    // Resuming the stored session after the compaction sees the compacted view.
    let run = env.run(Some(&fake), &["-p", "third question", "-c"]);
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(
        roles(&requests[4].body),
        ["system", "user", "user", "assistant", "user"]
    );
    assert!(
        requests[4].body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("EARLIER SUMMARY")
    );
    // The summariser got the older turn, without tools.
    assert!(requests[2].body.get("tools").is_none());
    // The retry carries the summary, then the question, and nothing older.
    let retry = &requests[3].body["messages"];
    assert_eq!(roles(&requests[3].body), ["system", "user", "user"]);
    assert!(
        retry[1]["content"]
            .as_str()
            .unwrap()
            .contains("EARLIER SUMMARY"),
        "{retry}"
    );
    assert_eq!(retry[2]["content"], "second question");
}

/// A rate limit that speaks of tokens is not a context refusal: the conversation is not
/// compacted away for it (the provider's wording is read once, where the answer is parsed).
#[test]
fn a_rate_limit_about_tokens_is_reported_not_compacted_for() {
    let env = Env::new();
    env.home.write_user_init("(setq llm.max-retries 0)");
    let limit = r#"{"error":{"message":"Rate limit reached: too many tokens per minute","code":"rate_limit_exceeded"}}"#;
    let fake = FakeModel::start([
        Reply::from(text_chunks(&["First answer."])),
        Reply::error(429, limit),
        Reply::from(text_chunks(&["SUMMARY"])),
    ]);
    assert_eq!(env.run(Some(&fake), &["-p", "first question"]).code, 0);
    let run = env.run(Some(&fake), &["-p", "second question", "-c"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("too many tokens per minute"), "{run:?}");
    assert!(!run.stdout.contains("Compacting"), "{run:?}");
    assert_eq!(fake.requests().len(), 2, "no summary call was made");
}

#[test]
fn a_second_context_length_error_is_reported_not_retried_again() {
    let env = Env::new();
    let too_long = r#"{"error":{"message":"prompt is too long"}}"#;
    let fake = FakeModel::start([
        Reply::from(text_chunks(&["First answer."])),
        Reply::error(400, too_long),
        Reply::from(text_chunks(&["SUMMARY"])),
        Reply::error(400, too_long),
    ]);
    assert_eq!(env.run(Some(&fake), &["-p", "first question"]).code, 0);
    let run = env.run(Some(&fake), &["-p", "second question", "-c"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("prompt is too long"), "{run:?}");
    assert_eq!(fake.requests().len(), 4);
}
