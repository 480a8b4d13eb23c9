//! The ACP client against the scripted fake agent (`oml-fake-agent`) over real pipes: through
//! the Lisp API with the real `oml` binary (`oml run`), and through the Rust core directly where
//! a condition is easier to await from Rust (late updates, reaping).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use oml::acp_client::{Client, ConnectOptions, Spawn, TurnEvent};
use serde_json::json;

const FAKE: &str = env!("CARGO_BIN_EXE_oml-fake-agent");
/// Only reached when a test is about to fail.
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs a Fennel program with `oml run` in a fresh [`support::home::Home`]; `arg[1]` is the fake
/// agent, `arg[2]` the project directory (the working directory). Returns (status, stdout,
/// stderr).
fn run_fennel(program: &str) -> (i32, String, String) {
    let home = support::home::Home::new();
    let file = home.write_project_file("prog.fnl", program);
    let out = home
        .blocking_command(&["--no-init", "run"])
        .arg(&file)
        .arg(FAKE)
        .arg(&home.project)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lines(program: &str) -> Vec<String> {
    let (status, stdout, stderr) = run_fennel(program);
    assert_eq!(status, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    stdout.lines().map(str::to_owned).collect()
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence. A zombie would still count, but every test
    // process is reaped by the client or re-parented to an init that reaps it.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn pid_from(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

// --- Through Lisp --------------------------------------------------------------------------

#[test]
fn connect_negotiates_v1_and_exposes_capabilities() {
    let out = lines(
        r#"
(local conn (client.connect (. arg 1) [:ok]))
(local c (client.capabilities conn))
(each [_ k (ipairs [:load-session :list-sessions :close-session :resume-session :delete-session
                    :image-content :audio-content :embedded-context :mcp-http :mcp-sse])]
  (print k (. c k)))
(print :version c.protocol-version c.agent-info.name c.agent-capabilities.promptCapabilities.image)
(print (: (tostring conn) :match "^#<acp%-connection Fake Agent 0.1 pid %d+>$"))
(client.close conn)
"#,
    );
    assert_eq!(
        out,
        [
            "load-session\ttrue",
            "list-sessions\ttrue",
            "close-session\ttrue",
            "resume-session\ttrue",
            "delete-session\tfalse",
            "image-content\ttrue",
            "audio-content\tfalse",
            "embedded-context\ttrue",
            "mcp-http\tfalse",
            "mcp-sse\ttrue",
            "version\t1\tfake-agent\ttrue",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([out[11].clone()])
        .collect::<Vec<_>>()
    );
    assert!(
        out[11].starts_with("#<acp-connection Fake Agent 0.1 pid "),
        "{}",
        out[11]
    );
}

#[test]
fn error_categories_reach_lisp_as_tables() {
    let out = lines(
        r#"
(fn try [...] (let [(ok e) (pcall ...)] (print ok e.category e.code (tostring e))))
(try client.connect "/nonexistent/agent" [])
(try client.connect (. arg 1) [:early-exit])
(try client.connect (. arg 1) [:bad-version])
(try client.connect (. arg 1) [:malformed])
(try client.connect (. arg 1) [:hang] {:startup-timeout 0.3})
(local conn (client.connect (. arg 1) [:session-error]))
(try client.new-session conn)
(local (_ e) (pcall client.new-session conn))
(print :auth (. e.data.authMethods 1 :id))
(try client.close-session conn "s")
(try client.new-session conn "relative/dir")
(client.close conn)
(local conn (client.connect (. arg 1) [:prompt-error]))
(local s (client.new-session conn))
(try client.prompt conn s.session-id "hi")
(client.close conn)
"#,
    );
    let expect = [
        "false\tconnection\tnil\tACP connection error: cannot start the agent `/nonexistent/agent`",
        "false\tconnection\tnil\tACP connection error: agent oml-fake-agent closed the connection before answering initialize; the agent exited with exit status 3; its stderr ends with:",
        "fake agent: cannot find my configuration, giving up",
        "false\tprotocol\tnil\tACP protocol error: the agent answered protocol version 2",
        "false\tprotocol\tnil\tACP protocol error: the agent wrote 10 unusable lines in a row",
        "false\tconnection\tnil\tACP connection error: initialize: the agent gave no answer within",
        "false\tagent\t-32000\tACP agent error: session/new failed: authentication required; the agent offers: login (Log in with a browser) (code -32000)",
        "auth\tlogin",
        "false\tcapability\tnil\tACP capability error: the agent does not advertise session/close",
        "false\tprotocol\tnil\tACP protocol error: the session cwd must be an absolute path",
        "false\tagent\t-32603\tACP agent error: session/prompt failed: Internal error: the model is unavailable (-32603) (code -32603)",
    ];
    assert_eq!(out.len(), expect.len(), "{out:#?}");
    for (got, want) in out.iter().zip(expect) {
        assert!(got.starts_with(want), "{got:?} should start with {want:?}");
    }
}

#[test]
fn connect_logs_in_with_a_set_variable_and_authenticate_logs_in_on_request() {
    let out = lines(
        r#"
(fn try [...] (let [(ok e) (pcall ...)] (print ok (if ok (type e) e.category) (if ok "" e.message))))
;; The variable is set: connect authenticates with the env-var method by itself.
(local conn (client.connect (. arg 1) [:auth-env] {:env {:FAKE_AGENT_KEY "sesame"}}))
(print :auto (. (client.capabilities conn) :authenticated))
(try client.new-session conn)
(client.close conn)
;; Not set (or not wanted): session/new says what to do, client.authenticate does it.
(local conn (client.connect (. arg 1) [:auth-env] {:env {:FAKE_AGENT_KEY "sesame"} :authenticate? false}))
(print :auto (. (client.capabilities conn) :authenticated))
(try client.new-session conn)
(try client.authenticate conn "nope")
(try client.authenticate conn "key")
(try client.new-session conn)
(client.close conn)
;; A variable with the wrong value: connect fails at once, saying why.
(try client.connect (. arg 1) [:auth-env] {:env {:FAKE_AGENT_KEY "wrong"}})
"#,
    );
    assert_eq!(
        out,
        [
            "auto\tkey",
            "true\ttable\t",
            "auto\tnil",
            "false\tagent\tsession/new failed: authentication required; the agent offers: browser (Log in with a browser), key (Use FAKE_AGENT_KEY)",
            "false\tagent\tauthenticate failed: no auth method Some(\"nope\") (-32602)",
            "true\tnil\t",
            "true\ttable\t",
            "false\tagent\tauthenticate failed: FAKE_AGENT_KEY is not the key (-32000)",
        ]
    );
}

#[test]
fn an_agent_is_named_by_definition_or_catalog_and_an_unknown_name_fails_at_once() {
    let out = lines(
        r#"
(fn try [...] (let [(ok e) (pcall ...)] (print ok e.category e.message)))
(try client.connect "no-such-agent" {:on-permission (fn [] :allow)})
(try client.connect "no-such-program-here" [])
(client.defagent :fake {:command (. arg 1) :args [:ok]})
(local conn (client.connect :fake {:on-permission (fn [] :allow)}))
(print :fake (. (client.capabilities conn) :agent-info :name))
(client.close conn)
;; "oml" is oml itself, from the catalog: `oml acp`.
(local conn (client.connect "oml" {:on-permission (fn [] :allow)}))
(print :oml (. (client.capabilities conn) :agent-info :name))
(client.close conn)
"#,
    );
    assert_eq!(
        out,
        [
            "false\tconfig\tno agent named no-such-agent is defined (client.agents: none); to run a command, give its arguments as a list: (client.connect \"/path/to/agent\" [args] opts)",
            "false\tconnection\tcannot start the agent `no-such-program-here`: there is no program `no-such-program-here` on PATH",
            "fake\tfake-agent",
            "oml\toml",
        ]
    );
}

#[test]
fn a_prompt_returns_its_ordered_updates_and_stop_reason() {
    let out = lines(
        r#"
(local seen [])
(local conn (client.connect (. arg 1) [:prompt-ok] {:on-update (fn [u] (table.insert seen u.content.text))}))
(local s (client.new-session conn))
(local r (client.prompt conn s.session-id "hi"))
(print r.stop-reason (length r.updates) r.text)
(each [_ u (ipairs r.updates)]
  (print u.kind u.sessionUpdate u.seq u.content.type u.content.text u.late))
(print :callback (table.concat seen "|"))
(local streamed [])
(local r (client.prompt conn s.session-id "again"
                        {:keep-updates? false :on-update (fn [u] (table.insert streamed u.content.text))}))
(print :streamed r.stop-reason (length r.updates) (table.concat streamed "|"))
(print :bad (pcall client.prompt conn s.session-id "x" {:keep-updates? :no}))
(client.close conn)
(local conn (client.connect (. arg 1) [:prompt-stop]))
(local s (client.new-session conn))
(print (. (client.prompt conn s.session-id [{:type :text :text "go"}]) :stop-reason))
(client.close conn)
"#,
    );
    assert_eq!(
        out,
        [
            "end-turn\t2\tHello, world!",
            "agent-message-chunk\tagent_message_chunk\t0\ttext\tHello, \tnil",
            "agent-message-chunk\tagent_message_chunk\t1\ttext\tworld!\tnil",
            "callback\tHello, |world!",
            "streamed\tend-turn\t0\tHello, |world!",
            "bad\tfalse\tACP protocol error: bad argument: :keep-updates? must be a boolean, got string",
            "max-tokens",
        ]
    );
}

#[test]
fn a_permission_request_naming_no_session_is_refused_not_asked() {
    let out = lines(
        r#"
(let [conn (client.connect (. arg 1) [:prompt-permission-sessionless]
                           {:on-permission (fn [req] :allow)})
      s (client.new-session conn)
      r (client.prompt conn s.session-id "write it")]
  (client.close conn)
  (print (. r.updates (length r.updates) :content :text)))
"#,
    );
    assert_eq!(out, ["refused -32602"]);
}

#[test]
fn the_permission_handler_decides_and_failures_reject_safely() {
    let out = lines(
        r#"
(fn turn [opts]
  (let [conn (client.connect (. arg 1) [:prompt-permission] opts)
        s (client.new-session conn)
        r (client.prompt conn s.session-id "write it")]
    (client.close conn)
    (. r.updates (length r.updates) :content :text)))
(print :allow (turn {:on-permission (fn [req] :allow)}))
(print :reject (turn {:on-permission (fn [req] :reject)}))
(print :by-id (turn {:on-permission (fn [req] (. req.options 2 :optionId))}))
(print :cancel (turn {:on-permission (fn [req] :cancel)}))
(print :none (turn {}))
(print :fails (turn {:on-permission (fn [req] (error "boom"))}))
(print :junk (turn {:on-permission (fn [req] 42)}))
(print :sees (turn {:on-permission (fn [req]
  (print req.session-id req.tool-call.toolCallId req.tool-call.rawInput.path (. req.options 1 :kind))
  :allow)}))
"#,
    );
    assert_eq!(
        out,
        [
            "allow\tselected allow",
            "reject\tselected reject",
            "by-id\tselected reject",
            "cancel\tcancelled",
            "none\tselected reject",
            "fails\tselected reject",
            "junk\tselected reject",
            "sess-1\tcall-1\t/tmp/notes.txt\tallow_once",
            "sees\tselected allow",
        ]
    );
}

#[test]
fn cancel_from_another_coroutine_ends_the_turn_as_cancelled() {
    let out = lines(
        r#"
;; The scenario: a permission handler that would answer only a minute later.
(local conn (client.connect (. arg 1) [:prompt-cancel] {:on-permission (fn [req] (oml.sleep 60000) :allow)}))
(local s (client.new-session conn))
(var started false)
(local h (client.spawn (fn []
  (client.prompt conn s.session-id "long job" {:on-update (fn [u] (set started true))}))))
;; Poll the flag the update handler sets once the turn runs; oml.sleep yields to it.
(while (not started) (oml.sleep 5))
(client.cancel conn s.session-id)
(local r (client.join h))
(print r.stop-reason (. r.updates (length r.updates) :content :text))
(client.close conn)
"#,
    );
    assert_eq!(out, ["cancelled\tpermission cancelled"]);
}

#[test]
fn sessions_and_connections_run_concurrently() {
    let out = lines(
        r#"
(local a (client.connect (. arg 1) [:ok]))
(local b (client.connect (. arg 1) [:ok]))
(local hs (icollect [_ conn (ipairs [a b a])]
  (client.spawn (fn [] (let [s (client.new-session conn)] (. (client.prompt conn s.session-id "x") :stop-reason))))))
(print (table.concat (icollect [_ h (ipairs hs)] (client.join h)) " "))
(local (ok e) (pcall client.join (client.spawn (fn [] (error {:category :mine})))))
(print ok e.category)
(client.close a)
(client.close b)
"#,
    );
    assert_eq!(out, ["end-turn end-turn end-turn", "false\tmine"]);
}

#[test]
fn sessions_close_when_advertised_and_optional_methods_work() {
    let out = lines(
        r#"
(local conn (client.connect (. arg 1) [:ok]))
(local s (client.new-session conn (. arg 2)))
(print (. s.modes.availableModes 2 :id))
(print (client.close-session conn s.session-id))
(print (length (. (client.list-sessions conn) :sessions)))
(print (. (client.load-session conn "sess-1") :updates 1 :content :text))
(print (. (client.resume-session conn "sess-1") :session-id))
(print (. (client.set-config-option conn "sess-1" "model" "fast") :configOptions 1 :currentValue))
(client.set-mode conn "sess-1" "code")
(client.set-model conn "sess-1" "m")
(print (client.close conn) (client.close conn))
(local conn (client.connect (. arg 1) [:close-ok]))
(print (client.close-session conn (. (client.new-session conn) :session-id)))
(client.close conn)
"#,
    );
    assert_eq!(
        out,
        [
            "code",
            "nil",
            "1",
            "earlier",
            "sess-1",
            "fast",
            "true\tfalse",
            "nil"
        ]
    );
}

#[test]
fn noisy_agents_huge_lines_odd_ids_and_unknown_requests_are_survived() {
    let out = lines(
        r#"
(fn last-text [mode]
  (let [conn (client.connect (. arg 1) [mode] {:on-permission (fn [] :allow)})
        s (client.new-session conn)
        r (client.prompt conn s.session-id "hi")]
    (client.close conn)
    (values r.stop-reason (. r.updates (length r.updates) :content :text) (length r.updates))))
(print (last-text :garbage-stdout))
(let [(stop text) (last-text :huge-line)] (print stop (length text)))
(print (last-text :ids))
(print (last-text :unknown-request))
(local conn (client.connect (. arg 1) [:updates-before-session-response]))
(local s (client.new-session conn))
(print (. s.updates 1 :kind) (. s.updates 1 :availableCommands 1 :name))
(client.close conn)
"#,
    );
    assert_eq!(
        out,
        [
            "end-turn\tworld!\t3",
            "end-turn\t5242880",
            "end-turn\tid \"req-a\" echoed true\t2",
            "end-turn\tfs/read_text_file answered -32601\t1",
            "available-commands-update\tweb",
        ]
    );
}

// --- Through the core ----------------------------------------------------------------------

fn options(mode: &str, env: Vec<(String, String)>) -> ConnectOptions {
    ConnectOptions {
        spawn: Spawn {
            command: FAKE.to_owned(),
            args: vec![mode.to_owned()],
            env,
            cwd: None,
        },
        ..ConnectOptions::default()
    }
}

#[tokio::test]
async fn late_updates_are_delivered_as_late_updates_of_their_turn() {
    let client = Client::connect(options("late-updates", vec![]))
        .await
        .unwrap();
    let mut late = client.take_out_of_turn().unwrap();
    let (session, _) = client.new_session(Path::new("/")).await.unwrap();
    let sid = session["sessionId"].as_str().unwrap();
    let mut turn = client
        .prompt(sid, json!([{"type": "text", "text": "x"}]), None)
        .unwrap();
    let mut texts = Vec::new();
    let stop = loop {
        match turn.next().await {
            TurnEvent::Updates(batch) => {
                texts.extend(batch.iter().map(|u| u.value["content"]["text"].clone()))
            }
            TurnEvent::Done(r) => break r.unwrap(),
        }
    };
    assert_eq!(stop.0, "end-turn");
    // "late" comes on a line after the answer: it is never counted in the turn.
    assert_eq!(texts, [json!("in time")]);
    let event = tokio::time::timeout(PATIENCE, late.recv())
        .await
        .expect("the late update arrives")
        .expect("the out-of-turn channel is open");
    assert_eq!(event.session_id, sid);
    assert!(event.update.late);
    assert_eq!(event.update.turn, Some(1));
    assert_eq!(event.update.value["content"]["text"], "late");
    assert!(client.close().await);
}

#[tokio::test]
async fn close_is_bounded_and_reaps_an_agent_that_ignores_eof_and_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let env = vec![(
        "FAKE_AGENT_PID_FILE".to_owned(),
        pid_file.display().to_string(),
    )];
    let client = Client::connect(options("ignores-stdin-eof", env))
        .await
        .unwrap();
    let pid = pid_from(&pid_file);
    // The agent never exits by itself: `close` returning at all means it was killed.
    assert!(!client.close().await, "not graceful");
    assert!(!alive(pid), "the agent was killed and reaped");
    assert!(!client.close().await, "a second close does nothing");
}

#[tokio::test]
async fn a_grandchild_in_the_agents_group_does_not_survive_close() {
    let dir = tempfile::tempdir().unwrap();
    let child_file: PathBuf = dir.path().join("grandchild");
    let env = vec![(
        "FAKE_AGENT_GRANDCHILD_FILE".to_owned(),
        child_file.display().to_string(),
    )];
    let client = Client::connect(options("spawns-grandchild", env))
        .await
        .unwrap();
    let grandchild = pid_from(&child_file);
    assert!(alive(grandchild));
    assert!(client.close().await, "the agent itself exits on EOF");
    // The grandchild was SIGKILLed; the kill may land a moment after close returns: await its
    // end (a zombie has ended, waiting for init to reap it), bounded.
    assert!(
        support::home::await_exit(grandchild, PATIENCE),
        "grandchild {grandchild} survived"
    );
}

#[tokio::test]
async fn a_version_mismatch_reaps_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let env = vec![(
        "FAKE_AGENT_PID_FILE".to_owned(),
        pid_file.display().to_string(),
    )];
    let error = Client::connect(options("bad-version", env))
        .await
        .unwrap_err();
    assert_eq!(error.category, oml::acp_client::Category::Protocol);
    assert!(!alive(pid_from(&pid_file)));
}

#[test]
fn a_program_that_ends_without_close_leaves_no_agent_behind() {
    let (status, stdout, stderr) = run_fennel(
        r#"(local c (client.connect (. arg 1) [:spawns-grandchild]
                            {:env {:FAKE_AGENT_GRANDCHILD_FILE (.. (. arg 2) "/grandchild")}}))
(print (. (client.capabilities c) :protocol-version))
(let [f (io.open (.. (. arg 2) "/grandchild"))] (print (f:read "*l")) (f:close))"#,
    );
    assert_eq!(status, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let grandchild: i32 = stdout
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no grandchild pid in {stdout:?}"));
    // oml has exited: the agent's whole group was killed on the way out. The kill may land a
    // moment later: await the grandchild's end (a zombie has ended), bounded.
    assert!(
        support::home::await_exit(grandchild, PATIENCE),
        "grandchild {grandchild} survived oml's exit"
    );
}

// --- A byte-exact agent: the same bytes, the same outcome ------------------------------------

/// How many times each byte stream is played; every run must give the same outcome.
const RUNS: usize = 50;

/// An agent that is a fixed byte stream: `sh` reads each request line and answers it with the
/// next file's bytes, whatever the timing (ids 1, 2, 3: initialize, session/new, session/prompt).
fn scripted(dir: &Path, turn: &str) -> ConnectOptions {
    let answers = [
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}"#,
        r#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}"#,
    ];
    for (n, text) in answers.iter().enumerate() {
        std::fs::write(dir.join(format!("{n}")), format!("{text}\n")).unwrap();
    }
    std::fs::write(dir.join("2"), turn).unwrap();
    let script = "read -r l; cat 0; read -r l; cat 1; read -r l; cat 2; cat >/dev/null";
    ConnectOptions {
        spawn: Spawn {
            command: "sh".to_owned(),
            args: vec!["-c".to_owned(), script.to_owned()],
            env: vec![],
            cwd: Some(dir.to_owned()),
        },
        ..ConnectOptions::default()
    }
}

fn chunk(text: &str) -> String {
    format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
    )
}

const ANSWER: &str = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"stopReason\":\"end_turn\"}}\n";

/// One play of `turn`: the texts of the turn's updates, its result, and the texts of the late
/// updates (waited for until `late` have come).
async fn play(dir: &Path, turn: &str, late: usize) -> (Vec<String>, String, Vec<String>) {
    let client = Client::connect(scripted(dir, turn)).await.unwrap();
    let mut out_of_turn = client.take_out_of_turn().unwrap();
    client.new_session(Path::new("/")).await.unwrap();
    let mut prompt = client
        .prompt("s1", json!([{"type": "text", "text": "x"}]), None)
        .unwrap();
    let mut texts = Vec::new();
    let result = loop {
        match prompt.next().await {
            TurnEvent::Updates(batch) => texts.extend(
                batch
                    .iter()
                    .map(|u| u.value["content"]["text"].as_str().unwrap().to_owned()),
            ),
            TurnEvent::Done(r) => break r.map(|s| s.0).unwrap_or_else(|e| e.to_string()),
        }
    };
    let mut lates = Vec::new();
    while lates.len() < late {
        let event = tokio::time::timeout(PATIENCE, out_of_turn.recv())
            .await
            .expect("the late update arrives")
            .expect("the channel is open");
        assert!(
            event.update.late && event.update.turn == Some(1),
            "{event:?}"
        );
        lates.push(
            event.update.value["content"]["text"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    client.close().await;
    (texts, result, lates)
}

/// Ten junk lines mid-turn: the connection fails at the tenth, every time after the same two
/// updates; what follows (updates, even the answer) is never read.
#[tokio::test]
async fn junk_mid_turn_fails_the_turn_at_the_same_line_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let junk = "not json at all\n".repeat(10);
    let turn = format!(
        "{}{}{junk}{}{}{ANSWER}",
        chunk("a"),
        chunk("b"),
        chunk("c"),
        chunk("d")
    );
    let want = (
        vec!["a".to_owned(), "b".to_owned()],
        "ACP protocol error: the agent wrote 10 unusable lines in a row on stdout; giving up"
            .to_owned(),
        vec![],
    );
    for run in 0..RUNS {
        assert_eq!(play(dir.path(), &turn, 0).await, want, "run {run}");
    }
    // Nine are noise the turn survives.
    let junk = "not json at all\n".repeat(9);
    let turn = format!("{}{junk}{}{ANSWER}", chunk("a"), chunk("b"));
    for run in 0..RUNS {
        let got = play(dir.path(), &turn, 0).await;
        assert_eq!(
            got,
            (vec!["a".into(), "b".into()], "end-turn".into(), vec![]),
            "run {run}"
        );
    }
}

/// Updates on the lines right after the answer are late updates of the turn, every time: never
/// counted in it, never dropped.
#[tokio::test]
async fn updates_after_the_answer_are_late_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let turn = format!(
        "{}{}{ANSWER}{}{}",
        chunk("a"),
        chunk("b"),
        chunk("late 1"),
        chunk("late 2")
    );
    let want = (
        vec!["a".to_owned(), "b".to_owned()],
        "end-turn".to_owned(),
        vec!["late 1".to_owned(), "late 2".to_owned()],
    );
    for run in 0..RUNS {
        assert_eq!(play(dir.path(), &turn, 2).await, want, "run {run}");
    }
}

/// Through Lisp, 50 plays of one stream: `client.prompt` returns exactly the updates before the
/// answer, and the late ones reach the turn's own callback and list afterwards, every time.
#[test]
fn through_lisp_late_updates_find_their_turn_every_time() {
    let home = support::home::Home::new();
    let turn = format!("{}{ANSWER}{}", chunk("in time"), chunk("late"));
    let ConnectOptions { spawn, .. } = scripted(&home.project, &turn);
    let program = format!(
        r#"
(local seen [])
(for [run 1 {RUNS}]
  (local conn (client.connect "sh" [:-c {script:?}] {{:cwd {cwd:?}}}))
  (local s (client.new-session conn "/"))
  (local late [])
  (local r (client.prompt conn s.session-id "x" {{:on-update (fn [u] (when u.late (table.insert late u.content.text)))}}))
  (local returned (length r.updates))
  (while (< (length late) 1) (oml.sleep 0.01))
  (table.insert seen (.. returned " " (. r.updates 1 :content :text) " " r.stop-reason " "
                         (. late 1) " " (length r.updates)))
  (client.close conn))
(each [_ line (ipairs seen)] (print line))
"#,
        script = spawn.args[1],
        cwd = home.project.display().to_string(),
    );
    let file = home.write_project_file("prog.fnl", &program);
    let out = home
        .blocking_command(&["--no-init", "run"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines, vec!["1 in time end-turn late 2"; RUNS]);
}

#[test]
fn additional_directories_go_only_to_an_agent_that_advertises_them() {
    let out = lines(
        r#"
(local project (. arg 2))
(local fake (client.connect (. arg 1) ["ok"]))
(case (pcall client.new-session fake project {:additional-directories ["/tmp"]})
  (false e) (print e.category (not= nil (e.message:find "additionalDirectories" 1 true))))
(client.close fake)
(local me (client.connect "oml" {:authenticate? false}))
(print (. (client.capabilities me) :additional-directories))
(print (type (. (client.new-session me project {:additional-directories ["/tmp"]}) :session-id)))
(case (pcall client.new-session me project {:additional-directories ["relative"]})
  (false e) (print e.category))
(client.close me)
"#,
    );
    assert_eq!(
        out,
        ["capability\ttrue", "true", "string", "protocol"],
        "{out:?}"
    );
}

#[test]
fn an_agent_that_gives_its_question_up_gets_request_cancelled_and_the_handler_stops() {
    let out = lines(
        r#"
(var asked false)
(local conn (client.connect (. arg 1) ["cancel-own-request"]
                            {:on-permission (fn [req] (set asked true) (oml.sleep 30000) :allow)}))
(local s (client.new-session conn (. arg 2)))
(local r (client.prompt conn s.session-id "go"))
(print r.stop-reason r.text)
(client.close conn)
"#,
    );
    assert_eq!(out, ["end-turn\tanswered error -32800"], "{out:?}");
}

#[test]
fn omls_client_answers_oml_acps_elicitation_with_a_lisp_handler() {
    // oml acp's model asks the user (the ask_user tool); the client answers in Lisp.
    let fake = support::fake_model::FakeModel::start([
        support::fake_model::Reply::from(support::fake_model::tool_call_chunks(
            "c1",
            "ask_user",
            &[r#"{"question": "Which database?", "choices": ["postgres", "sqlite"]}"#],
        )),
        support::fake_model::Reply::from(support::fake_model::text_chunks(&["ok"])),
    ]);
    let home = support::home::Home::new();
    let program = r#"
(var seen nil)
(local conn (client.connect "oml" {:authenticate? false
                                   :on-elicitation (fn [req] (set seen req)
                                                     {:action :accept :content {:answer "sqlite"}})}))
(local s (client.new-session conn (. arg 1)))
(local r (client.prompt conn s.session-id "set it up"))
(print r.stop-reason seen.mode seen.message (table.concat seen.requestedSchema.properties.answer.enum ","))
(client.close conn)
"#;
    let file = home.write_project_file("prog.fnl", program);
    let mut cmd = home.blocking_command(&["--no-init", "run"]);
    cmd.arg(&file).arg(&home.project);
    support::home::use_fake_model(&mut cmd, &fake.base_url());
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.trim(),
        "end-turn\tform\tWhich database?\tpostgres,sqlite"
    );
    let requests = fake.requests();
    let result = requests[1].body["messages"].to_string();
    assert!(result.contains("The user answered: sqlite"), "{result}");
}

#[test]
fn logout_goes_only_to_an_agent_that_offers_it_and_ends_the_login() {
    let out = lines(
        r#"
(fn try [...] (let [(ok e) (pcall ...)] (print ok (if ok (type e) e.category))))
(local conn (client.connect (. arg 1) [:auth-env] {:env {:FAKE_AGENT_KEY "sesame"}}))
(print (. (client.capabilities conn) :logout))
(try client.new-session conn (. arg 2))
(try client.logout conn)
(try client.new-session conn (. arg 2))
(client.close conn)
(local plain (client.connect (. arg 1) ["ok"]))
(try client.logout plain)
(client.close plain)
"#,
    );
    assert_eq!(
        out,
        [
            "true",
            "true\ttable",
            "true\tnil",
            "false\tagent",
            "false\tcapability"
        ],
        "{out:?}"
    );
}
