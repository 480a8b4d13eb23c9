//! The session owner: prompts from several shells queue in order, `cancel` from another shell,
//! the time to live, an agent or an owner killed and the session loaded again, `exec`.

use std::time::Duration;

use serde_json::Value;

use super::support::home::poll_until;
use super::{Shell, finish, gone, wait_for_state};

#[test]
fn prompts_from_three_shells_run_one_at_a_time_in_the_order_they_came() {
    let shell = Shell::new("ok");
    let first = shell.command(&["sleep:700 first"]).spawn().expect("first");
    wait_for_state(&shell, "running");
    let second = shell.command(&["sleep:10 second"]).spawn().expect("second");
    // The second is queued behind the first before the third comes.
    assert!(poll_until(
        Duration::from_secs(20),
        || shell.status()["queued"] == 1
    ));
    let third = shell.run(&["--no-wait", "sleep:10 third"]);
    assert_eq!(third.code, 0, "{third:?}");
    assert_eq!(third.stdout, "[queued] 2 ahead\n");
    let (first, second) = (finish(first), finish(second));
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(first.stdout, "sleeping done: first\n[done] end_turn\n");
    assert_eq!(second.stdout, "sleeping done: second\n[done] end_turn\n");
    wait_for_state(&shell, "idle");
    assert!(poll_until(Duration::from_secs(20), || {
        shell
            .run(&["sessions", "history"])
            .stdout
            .matches("[end_turn]")
            .count()
            == 3
    }));
    let history = shell.run(&["--json", "sessions", "history"]);
    let history: Vec<serde_json::Value> = serde_json::from_str(&history.stdout).expect("JSON");
    let prompts: Vec<&str> = history
        .iter()
        .map(|e| e["prompt"].as_str().unwrap())
        .collect();
    assert_eq!(
        prompts,
        ["sleep:700 first", "sleep:10 second", "sleep:10 third"]
    );
    // One agent, one session, all along.
    let who = shell.run(&["whoami"]);
    assert!(
        who.stdout.starts_with("session sess-1, turn 1 of pid"),
        "{who:?}"
    );
}

#[test]
fn cancel_from_another_shell_stops_the_running_prompt_and_keeps_the_session() {
    let shell = Shell::new("ok");
    let long = shell.command(&["sleep:30000 long"]).spawn().expect("long");
    wait_for_state(&shell, "running");
    // The owner says `running` as soon as it takes the prompt, before its agent has started:
    // wait for the agent too, whose pid must outlive the cancel.
    let mut running = Value::Null;
    let started = poll_until(Duration::from_secs(20), || {
        running = shell.status();
        running["agent_pid"].is_number()
    });
    assert!(started, "the agent never started: {running}");
    let cancel = shell.run(&["cancel"]);
    assert_eq!(
        cancel.stdout, "cancelled the running prompt\n",
        "{cancel:?}"
    );
    let long = finish(long);
    assert_eq!(long.code, 130, "{long:?}");
    assert!(long.stdout.ends_with("[done] cancelled\n"), "{long:?}");
    let idle = wait_for_state(&shell, "idle");
    assert_eq!(
        idle["agent_pid"], running["agent_pid"],
        "the agent was kept"
    );
    assert_eq!(shell.run(&["cancel"]).stdout, "nothing was running\n");
    let next = shell.run(&["whoami"]);
    assert_eq!(next.code, 0, "{next:?}");
    assert!(next.stdout.contains("session sess-1"), "{next:?}");
}

#[test]
fn the_owner_ends_after_its_time_to_live_and_the_next_prompt_loads_the_session() {
    let shell = Shell::new("ok");
    let first = shell.run(&["--ttl", "1", "whoami"]);
    assert!(first.stdout.contains("loaded []"), "{first:?}");
    let status = shell.status();
    let (owner, agent) = (
        status["owner_pid"].as_i64().unwrap() as i32,
        status["agent_pid"].as_i64().unwrap() as i32,
    );
    assert!(
        poll_until(Duration::from_secs(20), || gone(owner) && gone(agent)),
        "the owner and its agent ended"
    );
    assert_eq!(shell.status()["state"], "dead", "the record stays");
    let again = shell.run(&["whoami"]);
    assert!(
        again.stdout.contains("session sess-1") && again.stdout.contains("loaded [\"sess-1\"]"),
        "{again:?}"
    );
}

#[test]
fn an_agent_killed_between_prompts_is_started_again_and_its_session_loaded() {
    let shell = Shell::new("ok");
    shell.run(&["whoami"]);
    let agent = shell.status()["agent_pid"].as_i64().unwrap() as i32;
    // SAFETY: kill with the pid the owner reported.
    unsafe { libc::kill(agent, libc::SIGKILL) };
    assert!(poll_until(Duration::from_secs(10), || gone(agent)));
    let again = shell.run(&["whoami"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("loaded [\"sess-1\"]"), "{again:?}");
    assert_ne!(shell.status()["agent_pid"].as_i64().unwrap() as i32, agent);
}

#[test]
fn a_killed_owner_is_replaced_by_the_next_prompt_which_loads_the_session() {
    let shell = Shell::new("ok");
    shell.run(&["whoami"]);
    let status = shell.status();
    let (owner, agent) = (
        status["owner_pid"].as_i64().unwrap() as i32,
        status["agent_pid"].as_i64().unwrap() as i32,
    );
    // SAFETY: kill with the pid the owner reported.
    unsafe { libc::kill(owner, libc::SIGKILL) };
    // The agent sees its stdin close and ends too.
    assert!(poll_until(Duration::from_secs(10), || gone(owner) && gone(agent)));
    assert_eq!(shell.status()["state"], "dead");
    let again = shell.run(&["whoami"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("loaded [\"sess-1\"]"), "{again:?}");
    assert_ne!(shell.owner_pid(), Some(owner));
}

#[test]
fn an_agent_dying_mid_prompt_fails_that_prompt_and_the_next_one_starts_it_again() {
    let shell = Shell::new("exit-mid-turn");
    let died = shell.run(&["hello"]);
    assert_eq!(died.code, 1, "{died:?}");
    assert!(died.stdout.starts_with("starting"), "{died:?}");
    assert!(
        died.stderr.contains("exit status 7") && died.stderr.contains("lost my model"),
        "{died:?}"
    );
    let status = shell.status();
    assert_eq!(status["state"], "idle", "the owner stays: {status}");
    let again = shell.run(&["hello"]);
    assert_eq!(again.code, 1, "a new agent ran the prompt: {again:?}");
    assert!(again.stdout.starts_with("starting"), "{again:?}");
}

#[test]
fn exec_runs_a_one_shot_session_that_is_not_kept() {
    let shell = Shell::new("ok");
    let ran = shell.run(&["exec", "whoami"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(ran.stdout.contains("session sess-1, turn 1"), "{ran:?}");
    assert_eq!(shell.status()["state"], "none", "no owner, no record");
    let pid: i32 = ran
        .stdout
        .split("of pid ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        poll_until(Duration::from_secs(10), || gone(pid)),
        "the agent was closed"
    );
    assert!(shell.run(&["sessions"]).stdout.contains("no kept sessions"));
}

#[test]
fn named_sessions_are_separate_and_close_forgets_one() {
    let shell = Shell::new("ok");
    shell.run(&["whoami"]);
    let named = shell.run(&["-s", "review", "whoami"]);
    assert!(
        named.stdout.contains("turn 1"),
        "a separate agent and session: {named:?}"
    );
    let list = shell.run(&["--json", "sessions", "list"]);
    let list: Vec<serde_json::Value> = serde_json::from_str(&list.stdout).expect("JSON");
    let mut names: Vec<&str> = list.iter().map(|s| s["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["default", "review"]);
    let owner = shell.run(&["-s", "review", "--json", "status"]);
    let owner: serde_json::Value = serde_json::from_str(&owner.stdout).unwrap();
    let owner = owner["status"]["owner_pid"].as_i64().unwrap() as i32;
    assert_eq!(
        shell.run(&["-s", "review", "sessions", "close"]).stdout,
        "closed\n"
    );
    assert!(poll_until(Duration::from_secs(10), || gone(owner)));
    let list = shell.run(&["sessions"]).stdout;
    assert!(
        list.contains("default") && !list.contains("review"),
        "{list}"
    );
    let new = shell.run(&["sessions", "new"]);
    assert!(new.stdout.starts_with("new session sess-2"), "{new:?}");
    assert!(shell.run(&["whoami"]).stdout.contains("session sess-2"));
}

/// `cancel` while the agent is still starting (it answers `initialize` only after a long
/// while): the prompt ends at once, cancelled (130), the owner is free for the next one, and
/// the half-started agent is ended.
#[test]
fn cancel_while_the_agent_starts_ends_the_prompt_at_once_with_130() {
    let mut shell = Shell::new("ok");
    let pid_file = shell.home.root.join("agent.pid");
    shell.agent = format!("sh -c 'echo $$ > {}; exec sleep 600'", pid_file.display());
    let waiting = shell.command(&["hello"]).spawn().expect("the prompt");
    let agent = super::support::home::wait_for_pid(&pid_file);
    let cancel = shell.run(&["cancel"]);
    assert_eq!(
        cancel.stdout, "cancelled the running prompt\n",
        "{cancel:?}"
    );
    // Well before the agent's start-up timeout (a minute), which `finish` would reach first.
    let waiting = finish(waiting);
    assert_eq!(waiting.code, 130, "{waiting:?}");
    assert!(
        waiting.stdout.ends_with("[done] cancelled\n"),
        "{waiting:?}"
    );
    let idle = wait_for_state(&shell, "idle");
    assert!(idle["agent_pid"].is_null(), "no agent kept: {idle}");
    assert!(
        poll_until(Duration::from_secs(20), || gone(agent)),
        "the agent that never started was ended"
    );
}
