//! Flows (`flow.step`) and `client.ask` under `oml run`: a flow resumed after a failure, the
//! shipped examples against the scripted agent, and a flow sharing its session with `oml ask`.

use std::process::Stdio;

use super::{FAKE, Shell, finish};

/// A shell whose init file defines `fake` (and `other`) as the scripted agent in MODE.
fn shell_with_agents(mode: &str) -> Shell {
    let shell = Shell::new(mode);
    let define =
        |name: &str| format!("(client.defagent :{name} {{:command {FAKE:?} :args [{mode:?}]}})\n");
    super::support::home::write(
        &shell.home.user_init(),
        &(define("fake") + &define("other")),
    );
    shell
}

fn oml(shell: &Shell, args: &[&str], vars: &[(&str, &str)]) -> super::Ran {
    let mut cmd = shell.home.blocking_command(args);
    cmd.envs(vars.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    finish(cmd.spawn().expect("start oml"))
}

const RESUMABLE: &str = r#"
(local who (flow.step :ask (fn [] (. (client.ask :fake "whoami") :text))))
(print "step one:" who)
(flow.step :fragile (fn [] (when (os.getenv "FAIL") (error "the second step failed")) :ok))
(print "steps:" (table.concat (flow.steps) ","))
(flow.finish)
"#;

#[test]
fn a_flow_resumed_after_a_failure_runs_only_its_unfinished_steps() {
    let shell = shell_with_agents("ok");
    let flow = shell.home.project.join("resumable.fnl");
    std::fs::write(&flow, RESUMABLE).unwrap();
    let state = shell.home.project.join("resumable.fnl.state.json");
    let failed = oml(&shell, &["run", "resumable.fnl"], &[("FAIL", "1")]);
    assert_eq!(failed.code, 1, "{failed:?}");
    assert!(
        failed.stderr.contains("the second step failed"),
        "{failed:?}"
    );
    assert!(
        failed.stdout.contains("step one:\tsession sess-1, turn 1"),
        "{failed:?}"
    );
    let kept = std::fs::read_to_string(&state).expect("the state file");
    assert!(
        kept.contains("\"ask\"") && !kept.contains("fragile"),
        "{kept}"
    );
    let resumed = oml(&shell, &["run", "resumable.fnl"], &[]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    // The recorded answer, not a second prompt.
    assert!(
        resumed.stdout.contains("step one:\tsession sess-1, turn 1"),
        "{resumed:?}"
    );
    assert!(
        resumed.stdout.contains("steps:\task,fragile"),
        "{resumed:?}"
    );
    assert!(!state.exists(), "flow.finish forgets the state");
    // The flow's session is the one `oml ask fake` reaches: its second prompt.
    let ask = oml(&shell, &["ask", "fake", "whoami"], &[]);
    assert!(ask.stdout.contains("session sess-1, turn 2"), "{ask:?}");
    oml(&shell, &["ask", "fake", "sessions", "close"], &[]);
}

#[test]
fn client_ask_calls_the_lisp_handlers_and_raises_error_tables() {
    let shell = shell_with_agents("delegate");
    let program = r#"
(local kinds [])
(local r (client.ask :fake "hi" {:on-permission (fn [req] (if (= req.tool-call.kind :edit) :allow :reject))
                                 :on-update (fn [u] (table.insert kinds u.kind))
                                 :exec? true}))
(print r.stop-reason r.session-id)
(print r.text)
(print (table.concat kinds " "))
(case (pcall client.ask :nosuch "hi")
  (false e) (print "error:" e.category e.message))
(case (pcall client.ask :fake "hi" {:policy :sometimes})
  (false e) (print "error:" e.category))
"#;
    std::fs::write(shell.home.project.join("p.fnl"), program).unwrap();
    let ran = oml(&shell, &["run", "p.fnl"], &[]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines[0], "end-turn\tsess-1");
    assert_eq!(lines[1], "Permission: ok. Turn 1 in sess-1: hi");
    assert!(
        lines[2].starts_with("agent-message-chunk tool-call tool-call-update tool-call"),
        "{lines:?}"
    );
    assert!(
        lines[3].starts_with("error:\tconnection\tACP config error: no agent named nosuch"),
        "{lines:?}"
    );
    assert_eq!(lines[4], "error:\tprotocol");
}

#[test]
fn the_shipped_flows_run_against_scripted_agents() {
    let shell = shell_with_agents("ok");
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/flows");
    let compare = oml(
        &shell,
        &[
            "run",
            &format!("{examples}/compare.fnl"),
            "whoami",
            "fake",
            "other",
        ],
        &[],
    );
    assert_eq!(compare.code, 0, "{compare:?}");
    assert!(
        compare.stdout.contains("── fake ──\nsession sess-1")
            && compare.stdout.contains("── other ──\nsession sess-1"),
        "{compare:?}"
    );
    let review = oml(
        &shell,
        &[
            "run",
            &format!("{examples}/fix-then-review.fnl"),
            "fake",
            "other",
            "the bug",
        ],
        &[],
    );
    assert_eq!(review.code, 0, "{review:?}");
    assert!(
        review
            .stdout
            .contains("[fake] end-turn\n[other] end-turn\n[fake] end-turn"),
        "{review:?}"
    );
    let command = "test -e fixed || { touch fixed; echo 'test parse ... FAILED'; exit 101; }";
    let looped = oml(
        &shell,
        &[
            "run",
            &format!("{examples}/test-loop.fnl"),
            "fake",
            command,
            "3",
        ],
        &[],
    );
    assert_eq!(looped.code, 0, "{looped:?}");
    assert!(
        looped.stdout.contains("the tests pass after 1 fix(es)"),
        "{looped:?}"
    );
    let history = oml(&shell, &["ask", "fake", "sessions", "history"], &[]);
    assert!(
        history.stdout.contains("`test -e fixed"),
        "the failure went to the agent: {history:?}"
    );
    for agent in ["fake", "other"] {
        oml(&shell, &["ask", agent, "sessions", "close"], &[]);
    }
}
