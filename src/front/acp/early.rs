//! The ACP connection as it is opened, before the Lisp image exists: `initialize` is answered at
//! once, everything else is held, in line order, until the image is built.
//!
//! An editor starts `oml acp` and sends `initialize` first; its answer is the same whatever the
//! init files say (it is built in Rust, see [`initialize`]), so nothing makes the editor
//! wait for the Lisp boot to read it. Start-up lets the first answer go out before it builds
//! the image (at most [`FIRST_ANSWER_WAIT`]), so that the answer's threads do not wait for a
//! core behind the build; the build then overlaps the editor's own work between `initialize`
//! and `session/new`. What the answer's request tells the agent (the client's
//! capabilities) is kept and given to the Lisp side when it is there.
//!
//! It knows the `initialize` request and the transport; not sessions, prompts or Lisp.

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::acp::initialize::{
    AgentCapabilities, InitializeAnswer, McpCapabilities, PromptCapabilities, SessionCapabilities,
    offered,
};
use crate::acp::params::InitializeParams;
use crate::jsonrpc::{Connection, Incoming, RpcError};

/// What the opened connection saw before the image was built.
pub struct Greeted {
    /// The rest of the incoming messages (closed when stdin ended meanwhile).
    pub incoming: mpsc::UnboundedReceiver<Incoming>,
    /// Messages read before the image was ready, other than the answered `initialize`s, in line
    /// order.
    pub held: Vec<Incoming>,
    /// The client capabilities of the last `initialize` answered.
    pub capabilities: Option<Value>,
}

/// How long start-up waits for the editor's first `initialize` to be answered (written and
/// flushed) before it builds the image. An editor sends it as soon as it has started oml; on a
/// machine with few cores the answer's threads would otherwise wait for a core behind the
/// image's build. A client that sends nothing meanwhile costs start-up this much, once.
pub const FIRST_ANSWER_WAIT: std::time::Duration = std::time::Duration::from_millis(3);

/// The connection and the task that answers `initialize` while the image is built.
pub struct Opened {
    pub conn: Connection,
    ready: oneshot::Sender<()>,
    answering: JoinHandle<Greeted>,
    first_answer: Option<oneshot::Receiver<()>>,
}

/// Start the transport on `conn`'s channel and answer `initialize` until [`Opened::ready`].
pub fn open(conn: Connection, incoming: mpsc::UnboundedReceiver<Incoming>) -> Opened {
    let (ready, ready_rx) = oneshot::channel();
    let (answered, first_answer) = oneshot::channel();
    let answering = tokio::spawn(answer_until_ready(
        conn.clone(),
        incoming,
        ready_rx,
        answered,
    ));
    Opened {
        conn,
        ready,
        answering,
        first_answer: Some(first_answer),
    }
}

impl Opened {
    /// Wait until the first `initialize` has been answered and its answer is on the wire, or
    /// [`FIRST_ANSWER_WAIT`] has passed: the editor's first answer goes out before the image's
    /// build takes the cores.
    pub async fn first_answer(&mut self) {
        if let Some(answered) = self.first_answer.take() {
            let _ = tokio::time::timeout(FIRST_ANSWER_WAIT, answered).await;
        }
    }

    /// The image is built: stop answering and hand over what was read.
    pub async fn ready(self) -> (Connection, Greeted) {
        let _ = self.ready.send(());
        let greeted = match self.answering.await {
            Ok(greeted) => greeted,
            // The task never panics; if it did, the messages it held are lost with it and the
            // session starts from what comes next.
            Err(e) => {
                tracing::error!("the early ACP answerer failed: {e}");
                let (_, incoming) = mpsc::unbounded_channel();
                Greeted {
                    incoming,
                    held: Vec::new(),
                    capabilities: None,
                }
            }
        };
        (self.conn, greeted)
    }
}

async fn answer_until_ready(
    conn: Connection,
    mut incoming: mpsc::UnboundedReceiver<Incoming>,
    mut ready: oneshot::Receiver<()>,
    answered: oneshot::Sender<()>,
) -> Greeted {
    let mut answered = Some(answered);
    let mut held = Vec::new();
    let mut capabilities = None;
    loop {
        let message = tokio::select! {
            biased;
            _ = &mut ready => break,
            m = incoming.recv() => m,
        };
        let Some(message) = message else { break };
        match message {
            // A client asking for v2 waits for the image, which holds `acp.protocol-versions`.
            Incoming::Request(r) if r.method == "initialize" && !asks_v2(r.params.as_ref()) => {
                let answer = InitializeParams::parse(r.params)
                    .map_err(RpcError::invalid_params)
                    .and_then(|p| {
                        let answer = initialize(&p)?;
                        capabilities = Some(p.client_capabilities);
                        Ok(answer)
                    });
                respond(&conn, &r.id, answer).await;
                if let Some(answered) = answered.take() {
                    let _ = conn.flush().await;
                    let _ = answered.send(());
                }
            }
            other => held.push(other),
        }
    }
    Greeted {
        incoming,
        held,
        capabilities,
    }
}

/// Whether an `initialize` asks for version 2 or later.
fn asks_v2(params: Option<&Value>) -> bool {
    params
        .cloned()
        .and_then(|p| InitializeParams::parse(Some(p)).ok())
        .and_then(|p| p.protocol_version)
        .is_some_and(|v| v.0 >= 2)
}

async fn respond(
    conn: &Connection,
    id: &crate::jsonrpc::RequestId,
    answer: Result<Value, crate::jsonrpc::RpcError>,
) {
    let _ = match answer {
        Ok(value) => conn.respond(id, value).await,
        Err(error) => conn.respond_error(id, error).await,
    };
}

/// Who `oml acp` is, in its answer.
#[derive(serde::Serialize)]
struct Implementation {
    name: &'static str,
    title: &'static str,
    version: &'static str,
}

/// Who `oml acp` is (`agentInfo` in v1, `info` in v2).
pub(super) fn agent_info() -> Value {
    let info = Implementation {
        name: "oml",
        title: "oml",
        version: env!("CARGO_PKG_VERSION"),
    };
    serde_json::to_value(info).unwrap_or_default()
}

/// The protocol version we speak.
pub const PROTOCOL_VERSION: u64 = 1;

/// The answer to `initialize`: the same whatever the image holds, so that it can be given
/// before the image is built.
pub(super) fn initialize(params: &InitializeParams) -> Result<Value, RpcError> {
    let Some(asked) = &params.protocol_version else {
        return Err(RpcError::invalid_params("protocolVersion is required"));
    };
    tracing::debug!("the client asks for protocol version {}", asked.0);
    // We speak only version 1: a client asking for 1 or later gets 1 (it decides whether it can
    // go on), and so does one asking for 0, 1 being our latest.
    let all = offered(true);
    let answer = InitializeAnswer {
        protocol_version: PROTOCOL_VERSION,
        agent_capabilities: AgentCapabilities {
            load_session: true,
            session_capabilities: SessionCapabilities {
                list: all,
                resume: all,
                close: all,
                delete: all,
                fork: all,
                additional_directories: all,
            },
            prompt_capabilities: PromptCapabilities {
                image: true,
                audio: false,
                embedded_context: true,
            },
            mcp_capabilities: McpCapabilities {
                http: true,
                sse: false,
            },
        },
        auth_methods: super::auth::auth_methods(&params.client_capabilities),
        agent_info: agent_info(),
    };
    Ok(answer.to_value())
}
