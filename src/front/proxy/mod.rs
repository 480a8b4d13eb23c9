//! `oml proxy AGENT`: an ACP agent on stdio that forwards to another agent, every message in
//! both directions going through named Lisp steps (`proxy.fnl`: `proxy.to-agent`,
//! `proxy.to-client`, one step per method) that the user redefines or advises live.
//!
//! Two pumps, one per direction, each taking one line at a time in order: an answer to a request
//! the proxy sent itself is handed to its waiter; any other JSON message goes through
//! `proxy.dispatch` and what comes back is forwarded — the line as it came when Lisp left the
//! message as it was, so ids, `_meta`, unknown methods and fields pass untouched. A line that
//! is not JSON passes as it is. An answering step (`proxy.on-permission`) gives the answer the
//! sender gets; its default asks the other side with the request's own id.
//!
//! In a proxy chain (no agent given: the conductor of the proxy-chains RFD starts the proxy and
//! its successor), the successor is reached through the conductor on the same stdio: messages
//! for it go out in a `proxy/successor` envelope, its messages come in one, and the conductor's
//! `proxy/initialize` is the editor's `initialize`.
//!
//! Shutdown: the editor's EOF (or SIGTERM, SIGHUP) closes the agent's stdin and the proxy
//! exits 0 as soon as the agent has; only an agent that does not exit by itself meets the
//! ladder of every client agent (grace, SIGTERM, SIGKILL to its group). The agent's EOF answers
//! the editor's requests still with it with an error and ends the proxy with status 1. This
//! module does not know which agent it runs nor how its name was resolved (`cli`).

mod pump;
mod surface;

use std::sync::Arc;

use tokio::io::{AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

use crate::acp_client::{AgentProcess, Spawn};
use crate::cancel::CancelToken;
use crate::lisp::Lisp;
pub use surface::{Side, Sides};

/// How long the end waits for the agent's last lines, and for them to reach the editor.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Sets up the `proxy` namespace before the init files run; returns what [`serve`] needs.
/// `chain`: a component of a proxy chain, whose successor is reached through the conductor on
/// the same stdio.
pub fn install(lisp: &Lisp, chain: bool) -> mlua::Result<Wiring> {
    let (client_tx, client_rx) = mpsc::unbounded_channel();
    let (agent_tx, agent_rx) = if chain {
        (client_tx.clone(), None)
    } else {
        let (tx, rx) = mpsc::unbounded_channel();
        (tx, Some(rx))
    };
    let sides = Arc::new(Sides {
        client: Side::new(client_tx, false),
        agent: Side::new(agent_tx, chain),
        open: Default::default(),
    });
    surface::install(lisp, Arc::clone(&sides))?;
    Ok(Wiring {
        sides,
        client_rx,
        agent_rx,
    })
}

/// The two sides and their writers' queues (one queue in a chain: stdout carries both).
pub struct Wiring {
    sides: Arc<Sides>,
    client_rx: mpsc::UnboundedReceiver<Vec<u8>>,
    agent_rx: Option<mpsc::UnboundedReceiver<Vec<u8>>>,
}

/// The two pumps over their queues.
fn pumps(lisp: &Lisp, sides: &Arc<Sides>) -> (pump::Pump, pump::Pump) {
    let to_agent = pump::Pump {
        lisp: lisp.clone(),
        sides: Arc::clone(sides),
        direction: pump::Direction::ToAgent,
    };
    let to_client = pump::Pump {
        direction: pump::Direction::ToClient,
        ..to_agent.clone()
    };
    (to_agent, to_client)
}

/// Runs the proxy between this process's stdio and `agent` until either side ends; returns
/// the exit status (0 when the editor ended it, by EOF, SIGTERM or SIGHUP, as `oml acp` does;
/// 1 when the agent could not start or died).
pub async fn serve(lisp: Lisp, wiring: Wiring, agent: &Spawn, max_line: usize) -> i32 {
    let Wiring {
        sides,
        client_rx,
        agent_rx,
    } = wiring;
    let Some(agent_rx) = agent_rx else {
        return serve_chain(lisp, sides, client_rx, max_line).await;
    };
    let mut signals = crate::front::signals::Shutdown::listen();
    let (process, stdin, stdout) = match AgentProcess::spawn(agent) {
        Ok(p) => p,
        Err(e) => {
            crate::front::stdio::err!("oml proxy: cannot start the agent `{}`: {e}", agent.command);
            return 1;
        }
    };
    let client_end = CancelToken::new();
    let agent_end = CancelToken::new();
    let to_client = tokio::spawn(write_lines(
        tokio::io::stdout(),
        client_rx,
        client_end.clone(),
    ));
    let mut to_agent = tokio::spawn(write_lines(stdin, agent_rx, agent_end.clone()));
    let (from_client, from_agent) = pumps(&lisp, &sides);
    let (editor_tx, editor_rx) = mpsc::unbounded_channel();
    let (agent_tx, agent_lines) = mpsc::unbounded_channel();
    tokio::spawn(pump::read_lines(
        BufReader::new(tokio::io::stdin()),
        max_line,
        editor_tx,
    ));
    tokio::spawn(pump::read_lines(BufReader::new(stdout), max_line, agent_tx));
    let mut editor = tokio::spawn(from_client.run(editor_rx));
    let mut agent_side = tokio::spawn(from_agent.run(agent_lines));
    tokio::select! {
        // The editor is gone, or stops its agent (as the end of its input).
        _ = &mut editor => {}
        _ = signals.recv() => {}
        _ = &mut agent_side => {
            let why = match process.wait_exit(crate::acp_client::process::EXIT_REPORT_WAIT).await {
                Some(status) => crate::acp_client::process::describe_status(&status),
                None => "closed its output".to_owned(),
            };
            pump::agent_gone(&sides, &format!("the agent {why}; {}", process.stderr_tail().trim()));
            editor.abort();
            return finish(lisp, sides, to_client, client_end, &process, 1).await;
        }
    }
    // Nothing the editor was asked will be answered now: the steps waiting go on.
    sides.client.fail_pending();
    // The editor's last lines reach the agent, then its stdin closes; the agent's last lines
    // reach the editor as it ends.
    agent_end.cancel();
    if tokio::time::timeout(DRAIN_WAIT, &mut to_agent)
        .await
        .is_err()
    {
        to_agent.abort();
    }
    process.shutdown().await;
    let _ = tokio::time::timeout(DRAIN_WAIT, &mut agent_side).await;
    finish(lisp, sides, to_client, client_end, &process, 0).await
}

/// The end: what is queued for the editor goes out (at most [`DRAIN_WAIT`]: an editor that
/// reads nothing more does not hold the proxy), and the agent is ended if it has not.
async fn finish(
    lisp: Lisp,
    sides: Arc<Sides>,
    to_client: tokio::task::JoinHandle<()>,
    client_end: CancelToken,
    process: &AgentProcess,
    code: i32,
) -> i32 {
    drop(sides);
    drop(lisp);
    client_end.cancel();
    let _ = tokio::time::timeout(DRAIN_WAIT, to_client).await;
    process.shutdown().await;
    code
}

/// A component of a proxy chain: the conductor on stdio carries the editor's messages and, in
/// `proxy/successor` envelopes, the successor's. Ends when the conductor closes stdin.
async fn serve_chain(
    lisp: Lisp,
    sides: Arc<Sides>,
    out: mpsc::UnboundedReceiver<Vec<u8>>,
    max_line: usize,
) -> i32 {
    let mut signals = crate::front::signals::Shutdown::listen();
    let end = CancelToken::new();
    let writer = tokio::spawn(write_lines(tokio::io::stdout(), out, end.clone()));
    let (from_client, from_agent) = pumps(&lisp, &sides);
    let (agent_tx, agent_rx) = mpsc::unbounded_channel();
    let (client_tx, client_rx) = mpsc::unbounded_channel();
    let reader = pump::read_chain(
        BufReader::new(tokio::io::stdin()),
        max_line,
        Arc::clone(&sides),
        agent_tx,
        client_tx,
    );
    let to_agent = tokio::spawn(from_client.run(agent_rx));
    let to_client = tokio::spawn(from_agent.run(client_rx));
    // The conductor's EOF, SIGTERM and SIGHUP all end the component cleanly.
    tokio::select! {
        () = reader => {}
        _ = signals.recv() => {}
    }
    sides.client.fail_pending();
    sides.agent.fail_pending();
    let _ = tokio::time::timeout(DRAIN_WAIT, async {
        let _ = to_agent.await;
        let _ = to_client.await;
    })
    .await;
    drop(sides);
    drop(lisp);
    end.cancel();
    let _ = tokio::time::timeout(DRAIN_WAIT, writer).await;
    0
}

/// Writes each queued line, flushing after each, until the queue closes or the peer does, or
/// `end` is cancelled and what was queued by then is written. (The queue's senders live as
/// long as the Lisp image that holds them, so its closing cannot be what ends the writer.)
async fn write_lines(
    mut out: impl AsyncWrite + Unpin,
    mut lines: mpsc::UnboundedReceiver<Vec<u8>>,
    end: CancelToken,
) {
    let mut ending = false;
    loop {
        let line = tokio::select! {
            line = lines.recv() => line,
            () = end.cancelled(), if !ending => {
                ending = true;
                lines.close();
                continue;
            }
        };
        let Some(line) = line else { break };
        if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
            return;
        }
    }
    let _ = out.shutdown().await;
}
