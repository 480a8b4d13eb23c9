//! One direction of the proxy: lines from one peer, through `proxy.dispatch`, to the other.
//! Messages are taken one at a time, in order; a step that waits (a permission question put to
//! the editor) holds this direction until its answer, which comes in on the other one.

use std::sync::Arc;

use mlua::Value as LuaValue;
use serde_json::{Value, json};
use tokio::io::AsyncBufRead;

use super::surface::{Side, Sides};
use crate::cancel::CancelToken;
use crate::lisp::{Lisp, from_lua, to_lua};

/// JSON-RPC's "internal error", for a request a step failed on or dropped.
const INTERNAL_ERROR: i64 = -32603;

/// Which way the messages go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the editor to the agent.
    ToAgent,
    /// From the agent to the editor.
    ToClient,
}

impl Direction {
    fn step(self) -> &'static str {
        match self {
            Direction::ToAgent => "to-agent",
            Direction::ToClient => "to-client",
        }
    }
}

#[derive(Clone)]
pub struct Pump {
    pub lisp: Lisp,
    pub sides: Arc<Sides>,
    pub direction: Direction,
    pub max_line: usize,
}

impl Pump {
    /// The peer written to, and the one read from (which gets the answers of its requests).
    fn sides(&self) -> (&Side, &Side) {
        match self.direction {
            Direction::ToAgent => (&self.sides.agent, &self.sides.client),
            Direction::ToClient => (&self.sides.client, &self.sides.agent),
        }
    }

    /// Takes lines until the end of `input`.
    pub async fn run(self, mut input: impl AsyncBufRead + Unpin) {
        loop {
            let line = match crate::ask::wire::read_line_bytes(&mut input, self.max_line).await {
                Ok(Some(line)) => line,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!("oml proxy: {e}; ending this direction");
                    return;
                }
            };
            self.one(line).await;
        }
    }

    async fn one(&self, line: Vec<u8>) {
        let (to, from) = self.sides();
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
            to.send_line(line);
            return;
        };
        let is_request = msg.get("method").is_some() && msg.get("id").is_some();
        if msg.get("method").is_none() {
            // An answer to a request of the proxy's own (or one an answering step forwarded).
            if from.resolve(&msg) {
                return;
            }
            if self.direction == Direction::ToClient
                && let Some(id) = msg.get("id")
            {
                self.sides.open.lock().remove(&id.to_string());
            }
        }
        match self.dispatch(&msg, is_request).await {
            Ok(Dispatched { forward, answer }) => {
                if let Some(answer) = answer {
                    from.send(&json!({"jsonrpc": "2.0", "id": msg["id"], "result": answer}));
                }
                match forward {
                    Some(out) if out == msg => self.pass(to, line, &msg),
                    Some(out) => self.pass(to, serde_json::to_vec(&out).unwrap_or(line), &out),
                    None if is_request => {
                        from.send(&error_answer(&msg, "the proxy dropped this request"));
                    }
                    None => {}
                }
            }
            Err(e) => {
                tracing::warn!("oml proxy: a step failed on {}: {e}", describe(&msg));
                if is_request {
                    from.send(&error_answer(
                        &msg,
                        &format!("the proxy's step failed: {e}"),
                    ));
                } else {
                    self.pass(to, line, &msg);
                }
            }
        }
    }

    /// Forwards `line` (which is `msg`), noting an editor's request the agent now owes.
    fn pass(&self, to: &Side, line: Vec<u8>, msg: &Value) {
        if self.direction == Direction::ToAgent
            && msg.get("method").is_some()
            && let Some(id) = msg.get("id")
        {
            self.sides.open.lock().insert(id.to_string());
        }
        to.send_line(line);
    }

    async fn dispatch(
        &self,
        msg: &Value,
        is_request: bool,
    ) -> Result<Dispatched, crate::lisp::LispError> {
        let lisp = &self.lisp;
        let lua = lisp.lua();
        let f = lisp.function("proxy.dispatch")?.ok_or_else(|| {
            crate::lisp::LispError::Runtime("proxy.dispatch is not a function".into())
        })?;
        let table = to_lua(lua, msg)?;
        let forward = if is_request {
            LuaValue::Function(self.ask_other_side(msg)?)
        } else {
            LuaValue::Nil
        };
        let (out, answer): (LuaValue, Option<mlua::Table>) = lisp
            .run(
                f,
                (self.direction.step(), table, forward),
                &CancelToken::new(),
            )
            .await?;
        let forward = match out {
            LuaValue::Nil => None,
            v => Some(from_lua(lua, v)?),
        };
        let answer = match answer {
            Some(t) => Some(from_lua(lua, t.get::<LuaValue>("result")?)?),
            None => None,
        };
        Ok(Dispatched { forward, answer })
    }

    /// `(ask params)`: the request `msg` sent on with these params and its own id; returns
    /// the answer's result.
    fn ask_other_side(&self, msg: &Value) -> mlua::Result<mlua::Function> {
        let sides = Arc::clone(&self.sides);
        let direction = self.direction;
        let id = msg["id"].clone();
        let method = msg["method"].as_str().unwrap_or_default().to_owned();
        crate::lisp::create_async_function(self.lisp.lua(), move |lua, params: LuaValue| {
            let (sides, id, method) = (Arc::clone(&sides), id.clone(), method.clone());
            async move {
                let to = match direction {
                    Direction::ToAgent => &sides.agent,
                    Direction::ToClient => &sides.client,
                };
                let params = from_lua(&lua, params)?;
                match to.request(id, &method, params).await {
                    Ok(result) => to_lua(&lua, &result),
                    Err(error) => Err(crate::bind::rt(format!(
                        "{method}: {}",
                        error
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("failed")
                    ))),
                }
            }
        })
    }
}

/// What `proxy.dispatch` gave back.
struct Dispatched {
    forward: Option<Value>,
    answer: Option<Value>,
}

fn error_answer(msg: &Value, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": INTERNAL_ERROR, "message": message}})
}

fn describe(msg: &Value) -> String {
    match (msg.get("method").and_then(Value::as_str), msg.get("id")) {
        (Some(m), _) => m.to_owned(),
        (None, Some(id)) => format!("the answer to {id}"),
        (None, None) => "a message".to_owned(),
    }
}

/// The agent is gone: the editor's requests it owed are answered with `why`, and the
/// proxy's own requests to it fail.
pub fn agent_gone(sides: &Sides, why: &str) {
    let open = std::mem::take(&mut *sides.open.lock());
    for id in open {
        let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
        sides.client.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": INTERNAL_ERROR, "message": why}}),
        );
    }
    sides.agent.fail_pending();
}
