//! The `proxy` namespace's Rust side: the two sides of the proxy as Lisp sees them (requests
//! and notifications the steps send themselves: `proxy.request`, `proxy.notify`), and the
//! chunk `proxy.fnl` with the steps. What the steps do with the messages is all in Lisp.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mlua::{Lua, Table, Value as LuaValue};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::acp::rpc;
use crate::lisp::{HostFn, Lisp, create_async_function, from_lua, to_lua};

static PROXY_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_proxy.luac"));
const PROXY_FILE: &str = "src/front/proxy/proxy.fnl";
/// The proxy-chains RFD's envelope of what goes to and comes from the successor.
pub const SUCCESSOR: &str = rpc::SUCCESSOR;
/// What a conductor sends a proxy in place of `initialize`.
pub const PROXY_INITIALIZE: &str = "proxy/initialize";
/// The prefix of the ids of requests the proxy sends itself, apart from both peers' ids.
const OWN_ID_PREFIX: &str = "oml-proxy-";

/// One peer (the editor or the agent) as the proxy writes to it.
pub struct Side {
    /// Lines for the peer's writer, in order.
    out: mpsc::UnboundedSender<Vec<u8>>,
    /// In a proxy chain, the successor is reached through the conductor: requests and
    /// notifications go out in a `proxy/successor` envelope.
    wrap: bool,
    /// Requests sent to this peer whose answers the proxy awaits, by id (as JSON text).
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    next_id: AtomicU64,
}

impl Side {
    pub fn new(out: mpsc::UnboundedSender<Vec<u8>>, wrap: bool) -> Side {
        Side {
            out,
            wrap,
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
        }
    }

    /// Writes one line (a newline is added), in its envelope in a chain.
    pub fn send_line(&self, mut line: Vec<u8>) {
        if self.wrap
            && let Ok(msg) = serde_json::from_slice::<Value>(&line)
            && let Some(envelope) = rpc::wrap(&msg)
        {
            line = serde_json::to_vec(&envelope).unwrap_or(line);
        }
        line.push(b'\n');
        let _ = self.out.send(line);
    }

    pub fn send(&self, message: &Value) {
        self.send_line(serde_json::to_vec(message).unwrap_or_default());
    }

    /// Sends a request with `id` and awaits its answer: the `result`, or the `error` object.
    pub async fn request(&self, id: Value, method: &str, params: Value) -> Result<Value, Value> {
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(id.to_string(), tx);
        self.send(&rpc::request(&id, method, &params));
        match rx.await {
            Ok(answer) => rpc::outcome(answer),
            Err(_) => Err(rpc::error_object(
                rpc::INTERNAL_ERROR,
                "the peer went away before answering",
            )),
        }
    }

    /// A fresh id for a request of the proxy's own.
    pub fn own_id(&self) -> Value {
        Value::String(format!(
            "{OWN_ID_PREFIX}{}",
            self.next_id.fetch_add(1, Ordering::SeqCst)
        ))
    }

    /// Whether a request with `id` (as JSON text) awaits its answer from this peer.
    pub fn awaits(&self, id: &str) -> bool {
        self.pending.lock().contains_key(id)
    }

    /// Hands an answer to the request that awaits it; false when none does.
    pub fn resolve(&self, answer: &Value) -> bool {
        let Some(id) = rpc::Head::of(answer).id else {
            return false;
        };
        match self.pending.lock().remove(&id.to_string()) {
            Some(tx) => {
                let _ = tx.send(answer.clone());
                true
            }
            None => false,
        }
    }

    /// Fails every awaited request (the peer is gone): their waiters get an error.
    pub fn fail_pending(&self) {
        self.pending.lock().clear();
    }
}

/// Both sides, as the host functions find them.
pub struct Sides {
    pub client: Side,
    pub agent: Side,
    /// The ids (as JSON text) of the editor's requests the agent has not answered yet: answered
    /// with an error if the agent dies.
    pub open: Mutex<std::collections::HashSet<String>>,
}

impl Sides {
    pub fn named(&self, name: &str) -> Option<&Side> {
        match name {
            "client" | "editor" => Some(&self.client),
            "agent" => Some(&self.agent),
            _ => None,
        }
    }
}

const FUNCTIONS: &[HostFn] = &[
    HostFn {
        name: "request",
        args: "side method params",
        doc: "Send a request of the proxy's own to SIDE (:client or :agent) and wait for the \
              answer: returns its result, or raises its error's message.",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (side, method, params): (String, String, LuaValue)| async move {
                    let sides = sides(&lua)?;
                    let side = sides.named(&side).ok_or_else(|| {
                        crate::bind::rt(format!(
                            "proxy.request: no side {side} (:client or :agent)"
                        ))
                    })?;
                    let params = from_lua(&lua, params)?;
                    let answer = side.request(side.own_id(), &method, params).await;
                    answer_to_lua(&lua, &method, answer)
                },
            )
        },
    },
    HostFn {
        name: "notify",
        args: "side method params",
        doc: "Send a notification of the proxy's own to SIDE (:client or :agent).",
        make: |lua| {
            lua.create_function(|lua, (side, method, params): (String, String, LuaValue)| {
                let sides = sides(lua)?;
                let side = sides.named(&side).ok_or_else(|| {
                    crate::bind::rt(format!("proxy.notify: no side {side} (:client or :agent)"))
                })?;
                let params = from_lua(lua, params)?;
                side.send(&rpc::notification(&method, &params));
                Ok(())
            })
        },
    },
];

/// A request's answer as Lisp gets it: the result, or an error naming the method and the peer's
/// message.
pub fn answer_to_lua(
    lua: &Lua,
    method: &str,
    answer: Result<Value, Value>,
) -> mlua::Result<LuaValue> {
    match answer {
        Ok(result) => to_lua(lua, &result),
        Err(error) => Err(crate::bind::rt(format!(
            "{method}: {}",
            rpc::error_message(&error).unwrap_or("failed")
        ))),
    }
}

fn sides(lua: &Lua) -> mlua::Result<Arc<Sides>> {
    lua.app_data_ref::<Arc<Sides>>()
        .map(|s| Arc::clone(&s))
        .ok_or_else(|| crate::bind::rt("the proxy is not running"))
}

/// Installs `proxy` (the host functions, then `proxy.fnl`) before the init files run.
pub fn install(lisp: &Lisp, sides: Arc<Sides>) -> mlua::Result<()> {
    let lua = lisp.lua();
    lua.set_app_data(sides);
    crate::lisp::surface::define(lua, "proxy", FUNCTIONS)?;
    let proxy: Table = crate::lisp::surface::namespace(lua, "proxy")?;
    lua.load(PROXY_BYTECODE)
        .set_name(format!("@{PROXY_FILE}"))
        .set_mode(mlua::chunk::ChunkMode::Binary)
        .call::<()>(proxy)?;
    lisp.register_source(PROXY_FILE, include_str!("proxy.fnl"));
    Ok(())
}
