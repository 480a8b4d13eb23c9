//! A session's MCP servers: started together and in parallel, each within its bounded start-up
//! time; a server that fails is reported and kept as failed (the others and the session go on);
//! tools gathered from all running servers; a call routed to its server; stopped together.
//!
//! Notices (a server that failed, a tool that was skipped) go to the callback the set was made
//! with, once each. It knows nothing of sessions or Lisp.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::CallToolResult;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::watch;

use super::{McpError, McpTool, Server, ServerSpec};
use crate::cancel::CancelToken;

/// Where notices go.
pub type Notify = Arc<dyn Fn(String) + Send + Sync>;

/// A server's state, as `/mcp` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerStatus {
    pub name: String,
    /// `stdio`, `http` or `sse`.
    pub transport: &'static str,
    /// The command line or URL.
    pub target: String,
    /// `starting`, `running`, `failed` or `stopped`.
    pub state: &'static str,
    pub error: Option<String>,
    pub tools: usize,
    /// `name version` as the server introduced itself.
    pub info: String,
}

enum State {
    Starting,
    Running(Arc<Server>),
    Failed(String),
    Stopped,
}

struct Slot {
    spec: ServerSpec,
    state: State,
}

/// The servers of one session.
pub struct ServerSet {
    slots: Mutex<Vec<Slot>>,
    cwd: PathBuf,
    start_timeout: Duration,
    notify: Notify,
    /// How many servers are still starting.
    starting: watch::Sender<usize>,
    /// Cancelled by [`ServerSet::stop`]: starts under way give up.
    stopping: CancelToken,
}

impl ServerSet {
    /// Start `specs` in `cwd`, in the background and in parallel; a name given twice keeps the
    /// first. Returns at once: [`ServerSet::ready`] waits for the starts.
    pub fn start(
        specs: Vec<ServerSpec>,
        cwd: PathBuf,
        start_timeout: Duration,
        notify: Notify,
    ) -> Arc<ServerSet> {
        let mut unique: Vec<ServerSpec> = Vec::new();
        for spec in specs {
            if unique.iter().any(|s| s.name == spec.name) {
                notify(format!(
                    "MCP server {}: another server has this name; this one is not started",
                    spec.name
                ));
            } else {
                unique.push(spec);
            }
        }
        let (starting, _) = watch::channel(0);
        let set = Arc::new(ServerSet {
            slots: Mutex::new(Vec::new()),
            cwd,
            start_timeout,
            notify,
            starting,
            stopping: CancelToken::new(),
        });
        for spec in unique {
            set.launch(spec);
        }
        set
    }

    fn slots(&self) -> parking_lot::MutexGuard<'_, Vec<Slot>> {
        self.slots.lock()
    }

    /// Start `spec` in the background, in its slot (replacing what the slot held).
    fn launch(self: &Arc<Self>, spec: ServerSpec) {
        {
            let mut slots = self.slots();
            match slots.iter_mut().find(|s| s.spec.name == spec.name) {
                Some(slot) => slot.state = State::Starting,
                None => slots.push(Slot {
                    spec: spec.clone(),
                    state: State::Starting,
                }),
            }
        }
        self.starting.send_modify(|n| *n += 1);
        let set = Arc::clone(self);
        tokio::spawn(async move {
            let started = Server::start(&spec, &set.cwd, set.start_timeout, &set.stopping).await;
            let state = match started {
                Ok((server, notices)) => {
                    notices.into_iter().for_each(|n| (set.notify)(n));
                    State::Running(Arc::new(server))
                }
                Err(McpError::Cancelled) => State::Stopped,
                Err(e) => {
                    (set.notify)(format!("MCP server {} failed: {e}", spec.name));
                    State::Failed(e.to_string())
                }
            };
            let stale = {
                let mut slots = set.slots();
                match slots.iter_mut().find(|s| s.spec.name == spec.name) {
                    // Stopped while it started: it is stopped now too.
                    Some(slot) if matches!(slot.state, State::Stopped) => Some(state),
                    Some(slot) => {
                        slot.state = state;
                        None
                    }
                    None => Some(state),
                }
            };
            if let Some(State::Running(server)) = stale {
                server.stop().await;
            }
            set.starting.send_modify(|n| *n = n.saturating_sub(1));
        });
    }

    /// Wait until no server is starting (each start is bounded by its timeout).
    pub async fn ready(&self) {
        let mut rx = self.starting.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// The servers and their states, in the order they were given.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.slots()
            .iter()
            .map(|slot| {
                let (state, error, tools, info) = match &slot.state {
                    State::Starting => ("starting", None, 0, String::new()),
                    State::Running(s) if !s.is_alive() => (
                        "failed",
                        Some("the server exited".to_owned()),
                        0,
                        s.info.clone(),
                    ),
                    State::Running(s) => ("running", None, s.tool_count(), s.info.clone()),
                    State::Failed(e) => ("failed", Some(e.clone()), 0, String::new()),
                    State::Stopped => ("stopped", None, 0, String::new()),
                };
                ServerStatus {
                    name: slot.spec.name.clone(),
                    transport: slot.spec.transport.kind(),
                    target: slot.spec.transport.target(),
                    state,
                    error,
                    tools,
                    info,
                }
            })
            .collect()
    }

    fn running(&self) -> Vec<Arc<Server>> {
        self.slots()
            .iter()
            .filter_map(|s| match &s.state {
                State::Running(server) => Some(server.clone()),
                _ => None,
            })
            .collect()
    }

    /// The tools of every running server, once the starts are done; a name that two servers'
    /// tools share after cutting keeps the first, with a notice.
    pub async fn tools(&self) -> Vec<McpTool> {
        self.ready().await;
        let mut all: Vec<McpTool> = Vec::new();
        for server in self.running() {
            let (tools, notices) = server.tools().await;
            notices.into_iter().for_each(|n| (self.notify)(n));
            for tool in tools {
                if all.iter().any(|t| t.name == tool.name) {
                    (self.notify)(format!(
                        "MCP server {}: skipped tool {}: another server's tool is already called {}",
                        tool.server, tool.tool, tool.name
                    ));
                } else {
                    all.push(tool);
                }
            }
        }
        all
    }

    /// The running server called `name`.
    pub fn server(&self, name: &str) -> Result<Arc<Server>, McpError> {
        let slots = self.slots();
        let slot = slots
            .iter()
            .find(|s| s.spec.name == name)
            .ok_or_else(|| McpError::NoServer(name.to_owned()))?;
        match &slot.state {
            State::Running(server) => Ok(server.clone()),
            State::Starting => Err(McpError::NotRunning(
                name.to_owned(),
                "still starting".into(),
            )),
            State::Failed(e) => Err(McpError::NotRunning(name.to_owned(), e.clone())),
            State::Stopped => Err(McpError::NotRunning(name.to_owned(), "stopped".into())),
        }
    }

    /// Call `tool` (its name on the server) of server `server`; the raw result as JSON.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        args: Value,
        cancel: &CancelToken,
        timeout: Duration,
    ) -> Result<CallToolResult, McpError> {
        self.ready().await;
        self.server(server)?.call(tool, args, cancel, timeout).await
    }

    /// Stop the server called `name` (if it runs) and start it again; returns once it started
    /// or failed.
    pub async fn restart(self: &Arc<Self>, name: &str) -> Result<(), McpError> {
        let (spec, old) = {
            let mut slots = self.slots();
            let slot = slots
                .iter_mut()
                .find(|s| s.spec.name == name)
                .ok_or_else(|| McpError::NoServer(name.to_owned()))?;
            (
                slot.spec.clone(),
                std::mem::replace(&mut slot.state, State::Stopped),
            )
        };
        if let State::Running(server) = old {
            server.stop().await;
        }
        self.launch(spec);
        self.ready().await;
        self.server(name).map(|_| ())
    }

    /// Stop every server, in parallel, and give up starts under way; afterwards the set holds
    /// only stopped servers.
    pub async fn stop(&self) {
        self.stopping.cancel();
        let servers: Vec<Arc<Server>> = {
            let mut slots = self.slots();
            slots
                .iter_mut()
                .filter_map(|s| match std::mem::replace(&mut s.state, State::Stopped) {
                    State::Running(server) => Some(server),
                    _ => None,
                })
                .collect()
        };
        let mut tasks = tokio::task::JoinSet::new();
        for server in servers {
            tasks.spawn(async move { server.stop().await });
        }
        while tasks.join_next().await.is_some() {}
        // Starts under way give up (their process is ended); wait for them.
        self.ready().await;
    }
}
