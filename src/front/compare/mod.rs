//! `oml compare AGENT… -- PROMPT`: the same prompt to several ACP agents at once, each in a git
//! worktree of its own (`crate::project::worktree`, made from the repository's `HEAD`), then a
//! table of how each ended, how long it took, what it used and what it changed (`render`). The
//! worktrees are kept, for the user to inspect and merge (`/worktrees`, or git).
//!
//! Each agent is started through oml's ACP client in its worktree, asked in a new session, and
//! closed when its turn ends; its permission questions are answered by the policy of `oml ask`
//! (`--approve-all`, `--deny-all`, reads only, or the terminal, one question at a time). The
//! command line (`cli`) resolves the agents' names (that needs the Lisp image) and reads the
//! prompt; this front end runs and prints.
//!
//! Exit statuses ([`status`]): 0 every agent ended its turn (`end_turn`), 1 a worktree or an
//! agent failed, 2 a usage error, 3 an agent ended otherwise (refused, hit a limit, was
//! cancelled), 130 interrupted.

mod render;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use crate::acp::StopReason;
use crate::acp::answers::{self, UpdateKind, Usage};
use crate::acp_client::{
    Client, ClientError, ConnectOptions, PermissionDecision, PermissionHandler, Spawn, TurnEvent,
};
use crate::ask::AgentCommand;
use crate::ask::wire::Policy;
use crate::cancel::CancelToken;
use crate::front::stdio::err;
use crate::project::worktree::{self, Worktree};

pub use render::Output;

/// `oml compare`'s exit statuses.
pub mod status {
    pub const ALL_ENDED: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const NOT_ALL_ENDED: i32 = 3;
    pub const INTERRUPTED: i32 = 130;
}

/// One agent to compare: the name it is shown by, and how it is started.
pub struct Contender {
    pub name: String,
    pub command: AgentCommand,
}

/// How one agent's turn went.
pub struct Outcome {
    pub agent: String,
    pub worktree: Worktree,
    /// The stop reason, when the turn ended.
    pub stop_reason: Option<StopReason>,
    /// Why it did not, when it failed.
    pub error: Option<String>,
    pub duration_ms: u128,
    /// The last `usage_update` the agent sent.
    pub usage: Option<Usage>,
    /// `git diff --stat` of its worktree against the base, or why there is none.
    pub diffstat: Result<String, worktree::WorktreeError>,
}

/// Runs `prompt` on every contender, each in a new worktree of the repository `dir` is in
/// (under `state`), in parallel; prints the outcomes; returns the exit status.
pub async fn run(
    dir: &Path,
    state: &Path,
    contenders: Vec<Contender>,
    prompt: String,
    policy: Policy,
    ask: Option<PermissionHandler>,
    output: Output,
) -> i32 {
    let confine = crate::bind::project::worktree::confine;
    let mut trees = Vec::new();
    for c in &contenders {
        match worktree::add(dir, &c.name, state, confine).await {
            Ok(tree) => trees.push(tree),
            Err(e) => {
                err!("oml compare: {e}");
                return status::FAILED;
            }
        }
    }
    let interrupted = CancelToken::new();
    let watcher = {
        let interrupted = interrupted.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupted.cancel();
            }
        })
    };
    let one_question = Arc::new(tokio::sync::Mutex::new(()));
    // Spawned at once, so they run in parallel; awaited in order.
    let runs: Vec<_> = contenders
        .into_iter()
        .zip(trees)
        .map(|(c, tree)| {
            let handler = permission_handler(&c.name, policy, ask.clone(), one_question.clone());
            let prompt = prompt.clone();
            let stop = interrupted.clone();
            tokio::spawn(async move { run_one(c, tree, &prompt, handler, stop).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for run in runs {
        match run.await {
            Ok(mut outcome) => {
                outcome.diffstat = worktree::diffstat(
                    &outcome.worktree.path,
                    &outcome.worktree.base,
                    state,
                    confine,
                )
                .await;
                outcomes.push(outcome);
            }
            Err(e) => err!("oml compare: an agent's task failed: {e}"),
        }
    }
    watcher.abort();
    render::print(&outcomes, output);
    if interrupted.is_cancelled() {
        return status::INTERRUPTED;
    }
    exit_status(&outcomes)
}

/// 0 when every agent ended its turn; 1 when one failed; 3 when one ended otherwise.
fn exit_status(outcomes: &[Outcome]) -> i32 {
    if outcomes.iter().any(|o| o.stop_reason.is_none()) {
        status::FAILED
    } else if outcomes
        .iter()
        .all(|o| o.stop_reason == Some(StopReason::EndTurn))
    {
        status::ALL_ENDED
    } else {
        status::NOT_ALL_ENDED
    }
}

/// One agent's turn in its worktree, from its start to its close.
async fn run_one(
    contender: Contender,
    worktree: Worktree,
    prompt: &str,
    handler: PermissionHandler,
    stop: CancelToken,
) -> Outcome {
    let started = Instant::now();
    let mut usage = None;
    let result = turn(
        &contender.command,
        &worktree.path,
        prompt,
        handler,
        &stop,
        &mut usage,
    )
    .await;
    let (stop_reason, error) = match result {
        Ok(reason) => (Some(reason), None),
        Err(e) => (None, Some(e.to_string())),
    };
    Outcome {
        agent: contender.name,
        worktree,
        stop_reason,
        error,
        duration_ms: started.elapsed().as_millis(),
        usage,
        diffstat: Ok(String::new()),
    }
}

/// Starts the agent in `cwd`, sends the prompt in a new session and reads the turn to its stop
/// reason, keeping the last usage it reported; the agent is closed either way.
async fn turn(
    command: &AgentCommand,
    cwd: &Path,
    prompt: &str,
    handler: PermissionHandler,
    stop: &CancelToken,
    usage: &mut Option<Usage>,
) -> Result<StopReason, ClientError> {
    let AgentCommand { command, args, env } = command.clone();
    let client = Client::connect(ConnectOptions {
        spawn: Spawn {
            command,
            args,
            env,
            cwd: Some(PathBuf::from(cwd)),
        },
        on_permission: Some(handler),
        auto_authenticate: true,
        cancel: Some(stop.clone()),
        ..ConnectOptions::default()
    })
    .await?;
    let result = prompt_turn(&client, cwd, prompt, stop, usage).await;
    client.close().await;
    result
}

async fn prompt_turn(
    client: &Client,
    cwd: &Path,
    prompt: &str,
    stop: &CancelToken,
    usage: &mut Option<Usage>,
) -> Result<StopReason, ClientError> {
    let (answer, _) = client.new_session(cwd).await?;
    let session_id = answers::session_id(&answer).unwrap_or_default().to_owned();
    let mut turn = client.prompt(&session_id, json!([{"type": "text", "text": prompt}]), None)?;
    let mut cancel_sent = false;
    loop {
        let next = tokio::select! {
            next = turn.next() => next,
            () = stop.cancelled(), if !cancel_sent => {
                cancel_sent = true;
                client.cancel(&session_id).await?;
                continue;
            }
        };
        match next {
            TurnEvent::Updates(updates) => {
                for u in updates {
                    if let UpdateKind::Other(_) = u.kind
                        && let Some(reported) = answers::usage(&u.value)
                    {
                        *usage = Some(reported);
                    }
                }
            }
            TurnEvent::Done(result) => return result.map(|stop| stop.1),
        }
    }
}

/// The answers to one agent's permission questions under `policy`: reads and searches allowed
/// by `approve-reads`; under `ask`, the terminal's `ask` for the rest, one question at a time
/// (`one_question`), each after a line naming the agent.
fn permission_handler(
    agent: &str,
    policy: Policy,
    ask: Option<PermissionHandler>,
    one_question: Arc<tokio::sync::Mutex<()>>,
) -> PermissionHandler {
    let agent = agent.to_owned();
    Arc::new(move |request| {
        let kind = answers::tool_kind(&request.tool_call).map(str::to_owned);
        let read = kind.is_some_and(|k| crate::ask::worker::READ_KINDS.contains(&k.as_str()));
        let (ask, agent, one_question) = (ask.clone(), agent.clone(), one_question.clone());
        Box::pin(async move {
            match (policy, ask) {
                (Policy::ApproveAll, _) => Ok(PermissionDecision::Allow),
                (Policy::DenyAll, _) => Ok(PermissionDecision::Reject),
                _ if read => Ok(PermissionDecision::Allow),
                (Policy::Ask, Some(ask)) => {
                    let _turn = one_question.lock().await;
                    err!("[{}] asks:", crate::printable::printable(&agent));
                    ask(request).await
                }
                _ => Ok(PermissionDecision::Reject),
            }
        })
    })
}
