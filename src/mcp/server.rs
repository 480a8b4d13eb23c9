//! One MCP server, connected: started (a process of its own for stdio, a streamable HTTP
//! connection otherwise), initialised within a bounded time, its tools listed, its tools called,
//! and stopped.
//!
//! A stdio server runs in a process group of its own through `acp_client::process`, the same
//! launcher and shutdown ladder as ACP agents: stopping closes its stdin, waits, then ends the
//! whole group, so a server started through `npx` or `sh -c` leaves nothing behind. It does not
//! know sessions, Lisp or the permission policy.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ClientRequest,
    CustomRequest, Implementation, ServerResult,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use serde_json::{Map, Value};

use super::McpError;
use super::http;
use super::spec::{ServerSpec, Transport};
use super::tools::{McpTool, parse_tools};
use crate::acp_client::process::{AgentProcess, Spawn, describe_status};
use crate::cancel::CancelToken;

/// Bytes one message from a server may have at most (a line over stdio, a body or SSE event
/// over HTTP); a tool result is truncated after it arrives, to `mcp.max-chars`.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;
/// `tools/list` pages read at most (a server whose cursor never ends stops here).
pub const LIST_PAGES_MAX: usize = 100;
/// How long stopping waits for the connection to close before the process group is ended.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// How long a failed start waits for the exit status it reports.
const EXIT_WAIT: Duration = Duration::from_millis(500);
/// Characters of a server's stderr quoted in an error.
const STDERR_QUOTE_CHARS: usize = 1500;

/// What oml tells a server about itself, and what it learns of tool list changes.
#[derive(Clone)]
struct Handler {
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("oml", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}

/// A connected server. Dropping it without [`Server::stop`] still ends its process (the
/// launcher kills it when oml exits), but `stop` is the orderly way.
pub struct Server {
    pub spec: ServerSpec,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    peer: Peer<RoleClient>,
    process: Option<AgentProcess>,
    tools: Mutex<Vec<McpTool>>,
    tools_changed: Arc<AtomicBool>,
    /// `name version` as the server introduced itself.
    pub info: String,
}

impl Server {
    /// Start `spec` in `cwd` and list its tools, all within `timeout`. Returns the server and
    /// the notices of tools that were skipped.
    pub async fn start(
        spec: &ServerSpec,
        cwd: &Path,
        timeout: Duration,
        cancel: &CancelToken,
    ) -> Result<(Server, Vec<String>), McpError> {
        let changed = Arc::new(AtomicBool::new(false));
        let handler = Handler {
            tools_changed: changed.clone(),
        };
        let (service, process) = connect(spec, cwd, timeout, cancel, handler).await?;
        let peer = service.peer().clone();
        let info = peer
            .peer_info()
            .and_then(|i| i.server_info.clone())
            .map(|i| format!("{} {}", i.name, i.version))
            .unwrap_or_default();
        let server = Server {
            spec: spec.clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            peer,
            process,
            tools: Mutex::new(Vec::new()),
            tools_changed: changed,
            info,
        };
        let listed = tokio::select! {
            listed = tokio::time::timeout(timeout, server.list()) => listed,
            () = cancel.cancelled() => Ok(Err(McpError::Cancelled)),
        };
        match listed {
            Ok(Ok(notices)) => Ok((server, notices)),
            Ok(Err(e)) => {
                server.stop().await;
                Err(e)
            }
            Err(_) => {
                server.stop().await;
                Err(McpError::StartTimeout(timeout))
            }
        }
    }

    /// Read the server's tools again (all pages); returns the skipped tools' notices.
    async fn list(&self) -> Result<Vec<String>, McpError> {
        let offers_tools = self
            .peer
            .peer_info()
            .is_none_or(|i| i.capabilities.tools.is_some());
        if !offers_tools {
            return Ok(Vec::new());
        }
        let mut raw: Vec<Value> = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..LIST_PAGES_MAX {
            let params = cursor.take().map(|cursor| {
                let mut params = Map::new();
                params.insert("cursor".into(), Value::String(cursor));
                Value::Object(params)
            });
            // A custom request, so that the answer arrives as JSON when rmcp's typed
            // `ListToolsResult` refuses it: one malformed tool must not hide the others.
            let request = ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
            let answer = self.peer.send_request(request).await;
            let answer = match answer {
                Ok(answer) => answer,
                Err(e) => return Err(self.failure(&e.to_string()).await),
            };
            let page = match answer {
                ServerResult::CustomResult(custom) => custom.0,
                other => serde_json::to_value(other).unwrap_or_default(),
            };
            let page = ToolsPage::read(page);
            raw.extend(page.tools.0.unwrap_or_default());
            cursor = page.next_cursor.0;
            if cursor.is_none() {
                break;
            }
        }
        let (tools, notices) = parse_tools(&self.spec.name, &raw);
        *self.tools.lock() = tools;
        Ok(notices)
    }

    /// The server's tools, listed again first when it said they changed
    /// (`notifications/tools/list_changed`); the notices of skipped tools come with them.
    pub async fn tools(&self) -> (Vec<McpTool>, Vec<String>) {
        let mut notices = Vec::new();
        if self.tools_changed.swap(false, Ordering::SeqCst) {
            match self.list().await {
                Ok(n) => notices = n,
                Err(e) => notices.push(format!(
                    "MCP server {}: cannot list its tools again: {e}",
                    self.spec.name
                )),
            }
        }
        let tools = self.tools.lock().clone();
        (tools, notices)
    }

    /// How many tools the last listing offered.
    pub fn tool_count(&self) -> usize {
        self.tools.lock().len()
    }

    /// Whether the connection is still up.
    pub fn is_alive(&self) -> bool {
        !self.peer.is_transport_closed()
            && self
                .process
                .as_ref()
                .is_none_or(|p| p.exit_status().is_none())
    }

    /// Call the tool `tool` (its name on the server) with `args` (a JSON object); its
    /// `CallToolResult` as rmcp read it. Cancelling `cancel` or reaching `timeout` abandons the call
    /// (rmcp tells the server with `notifications/cancelled`).
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
        cancel: &CancelToken,
        timeout: Duration,
    ) -> Result<CallToolResult, McpError> {
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            // An empty Lua table arrives as an empty list.
            Value::Array(a) if a.is_empty() => Map::new(),
            other => {
                return Err(McpError::Call(format!(
                    "the arguments must be an object, not {other}"
                )));
            }
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        tokio::select! {
            result = self.peer.call_tool(params) => match result {
                Ok(result) => Ok(result),
                Err(e) => Err(self.failure(&e.to_string()).await),
            },
            () = cancel.cancelled() => Err(McpError::Cancelled),
            () = tokio::time::sleep(timeout) => Err(McpError::CallTimeout(timeout)),
        }
    }

    /// An error of the connection, with the exit status and stderr of a server that exited
    /// (waiting [`EXIT_WAIT`] for the status when the connection closed first).
    async fn failure(&self, error: &str) -> McpError {
        let closed = self.peer.is_transport_closed();
        if let Some(p) = &self.process {
            let status = if closed {
                p.wait_exit(EXIT_WAIT).await
            } else {
                p.exit_status()
            };
            if let Some(status) = status {
                return McpError::Exited(format!(
                    "the server exited ({}){}",
                    describe_status(&status),
                    stderr_quote(p)
                ));
            }
        }
        if closed {
            McpError::Exited(format!("the connection closed: {error}"))
        } else {
            McpError::Call(error.to_owned())
        }
    }

    /// Close the connection (a stdio server sees end-of-file), then end the server's process
    /// group. Idempotent; bounded by [`CLOSE_WAIT`] and the launcher's shutdown ladder.
    pub async fn stop(&self) {
        if let Some(mut service) = self.service.lock().await.take() {
            let _ = service.close_with_timeout(CLOSE_WAIT).await;
        }
        if let Some(process) = &self.process {
            process.shutdown().await;
        }
    }
}

/// The running service of `spec` (and its process, for stdio), once `initialize` is answered
/// within `timeout`; a cancel gives up (ending the process).
async fn connect(
    spec: &ServerSpec,
    cwd: &Path,
    timeout: Duration,
    cancel: &CancelToken,
    handler: Handler,
) -> Result<(RunningService<RoleClient, Handler>, Option<AgentProcess>), McpError> {
    let connected = match &spec.transport {
        Transport::Sse { .. } => return Err(McpError::Unsupported),
        Transport::Stdio { command, args, env } => {
            let launch = Spawn {
                command: command.clone(),
                args: args.clone(),
                env: env.clone(),
                cwd: Some(cwd.to_path_buf()),
            };
            let (process, stdin, stdout) = AgentProcess::spawn(&launch).map_err(|e| {
                McpError::Start(format!("cannot run `{}`: {e}", spec.transport.target()))
            })?;
            let transport =
                AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_MESSAGE_BYTES);
            let served = tokio::select! {
                served = tokio::time::timeout(timeout, handler.serve(transport)) => served,
                () = cancel.cancelled() => {
                    tokio::spawn(async move { process.shutdown().await });
                    return Err(McpError::Cancelled);
                }
            };
            match served {
                Ok(Ok(service)) => (service, Some(process)),
                Ok(Err(e)) => return Err(failed_start(&process, &e.to_string()).await),
                Err(_) => {
                    tokio::spawn(async move { process.shutdown().await });
                    return Err(McpError::StartTimeout(timeout));
                }
            }
        }
        Transport::Http { url, headers } => {
            let transport = http::transport(url, headers, MAX_MESSAGE_BYTES)?;
            let served = tokio::select! {
                served = tokio::time::timeout(timeout, handler.serve(transport)) => served,
                () = cancel.cancelled() => return Err(McpError::Cancelled),
            };
            match served {
                Ok(Ok(service)) => (service, None),
                Ok(Err(e)) => return Err(McpError::Start(e.to_string())),
                Err(_) => return Err(McpError::StartTimeout(timeout)),
            }
        }
    };
    Ok(connected)
}

/// The error of a stdio server that did not complete `initialize`: its exit status and stderr
/// when it exited; the process is ended.
async fn failed_start(process: &AgentProcess, error: &str) -> McpError {
    let status = process.wait_exit(EXIT_WAIT).await;
    let message = match status {
        Some(status) => format!(
            "the server exited ({}){}",
            describe_status(&status),
            stderr_quote(process)
        ),
        None => format!("{error}{}", stderr_quote(process)),
    };
    let process = process.clone();
    tokio::spawn(async move { process.shutdown().await });
    McpError::Start(message)
}

/// `; its stderr ends: …` with the last [`STDERR_QUOTE_CHARS`] characters, or nothing.
fn stderr_quote(process: &AgentProcess) -> String {
    let tail = process.stderr_tail();
    let tail = tail.trim();
    if tail.is_empty() {
        return String::new();
    }
    let start = tail
        .char_indices()
        .rev()
        .nth(STDERR_QUOTE_CHARS)
        .map_or(0, |(i, _)| i);
    format!("; its stderr ends: {}", &tail[start..])
}
/// One page of `tools/list`, read leniently: its tools as sent (each checked on its own by
/// `parse_tools`), and the cursor of the next page.
#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolsPage {
    #[serde(default)]
    tools: crate::acp::Loose<Vec<Value>>,
    #[serde(default)]
    next_cursor: crate::acp::Loose<String>,
}

impl ToolsPage {
    fn read(page: Value) -> ToolsPage {
        serde_json::from_value(page).unwrap_or_default()
    }
}
