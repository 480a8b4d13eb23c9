//! One direction of the proxy: lines from one peer, through `proxy.dispatch`, to the other.
//! Messages are taken one at a time, in order; a step that waits (a permission question put to
//! the editor) holds this direction until its answer, which comes in on the other one.

use std::sync::Arc;

use mlua::Value as LuaValue;
use serde_json::Value;
use tokio::io::AsyncBufRead;
use tokio::sync::mpsc;

use super::surface::{Side, Sides};
use crate::acp::rpc::{self, Head};
use crate::cancel::CancelToken;
use crate::lisp::{Lisp, from_lua, to_lua};

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
}

impl Pump {
    /// The peer written to, and the one read from (which gets the answers of its requests).
    fn sides(&self) -> (&Side, &Side) {
        match self.direction {
            Direction::ToAgent => (&self.sides.agent, &self.sides.client),
            Direction::ToClient => (&self.sides.client, &self.sides.agent),
        }
    }

    /// Takes lines until their queue closes.
    pub async fn run(self, mut lines: mpsc::UnboundedReceiver<Vec<u8>>) {
        while let Some(line) = lines.recv().await {
            self.one(line).await;
        }
    }

    async fn one(&self, line: Vec<u8>) {
        let (to, from) = self.sides();
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
            to.send_line(line);
            return;
        };
        let head = Head::of(&msg);
        let is_request = head.is_request();
        if head.is_answer() {
            // An answer to a request of the proxy's own (or one an answering step forwarded).
            if from.resolve(&msg) {
                return;
            }
            if self.direction == Direction::ToClient
                && let Some(id) = &head.id
            {
                self.sides.open.lock().remove(&id.to_string());
            }
        }
        match self.dispatch(&msg, is_request).await {
            Ok(Dispatched { forward, answer }) => {
                if let Some(answer) = &answer {
                    from.send(&rpc::answer(&id_of(&head), answer));
                }
                match forward {
                    // A request the step answered is not also sent on: the other side's answer
                    // would be a second one with the same id.
                    Some(_) if is_request && answer.is_some() => {
                        tracing::debug!(
                            "oml proxy: {} answered by a step, not sent on",
                            describe(&head)
                        );
                    }
                    Some(out) if out == msg => self.pass(to, line, &msg),
                    Some(out) => self.pass(to, serde_json::to_vec(&out).unwrap_or(line), &out),
                    // A request an answering step answered is not also refused.
                    None if is_request && answer.is_none() => {
                        from.send(&rpc::internal_error(
                            &id_of(&head),
                            "the proxy dropped this request",
                        ));
                    }
                    None => {}
                }
            }
            Err(e) => {
                tracing::warn!("oml proxy: a step failed on {}: {e}", describe(&head));
                if is_request {
                    from.send(&rpc::internal_error(
                        &id_of(&head),
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
        let head = Head::of(msg);
        if self.direction == Direction::ToAgent
            && head.method.is_some()
            && let Some(id) = &head.id
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
        let head = Head::of(msg);
        let id = id_of(&head);
        let method = head.method().unwrap_or_default().to_owned();
        crate::lisp::create_async_function(self.lisp.lua(), move |lua, params: LuaValue| {
            let (sides, id, method) = (Arc::clone(&sides), id.clone(), method.clone());
            async move {
                let to = match direction {
                    Direction::ToAgent => &sides.agent,
                    Direction::ToClient => &sides.client,
                };
                let params = from_lua(&lua, params)?;
                let answer = to.request(id, &method, params).await;
                super::surface::answer_to_lua(&lua, &method, answer)
            }
        })
    }
}

/// What `proxy.dispatch` gave back.
struct Dispatched {
    forward: Option<Value>,
    answer: Option<Value>,
}

/// A message's id, null when it has none.
fn id_of(head: &Head) -> Value {
    head.id.clone().unwrap_or(Value::Null)
}

fn describe(head: &Head) -> String {
    match (head.method(), &head.id) {
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
        sides.client.send(&rpc::internal_error(&id, why));
    }
    sides.agent.fail_pending();
}

/// Reads `input`'s lines into `queue` until its end (or a line over `max`).
pub async fn read_lines(
    mut input: impl AsyncBufRead + Unpin,
    max: usize,
    queue: mpsc::UnboundedSender<Vec<u8>>,
) {
    loop {
        match crate::ask::wire::read_line_bytes(&mut input, max).await {
            Ok(Some(line)) => {
                if queue.send(line).is_err() {
                    return;
                }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("oml proxy: {e}; ending this direction");
                return;
            }
        }
    }
}

/// A chain component's one input, the conductor: `proxy/successor` envelopes are the
/// successor's messages (unwrapped, to the editor's queue), answers go where their request came
/// from, `proxy/initialize` is the editor's `initialize`, and the rest is the editor's.
pub async fn read_chain(
    mut input: impl AsyncBufRead + Unpin,
    max: usize,
    sides: Arc<Sides>,
    to_agent: mpsc::UnboundedSender<Vec<u8>>,
    to_client: mpsc::UnboundedSender<Vec<u8>>,
) {
    use super::surface::{PROXY_INITIALIZE, SUCCESSOR};
    loop {
        let line = match crate::ask::wire::read_line_bytes(&mut input, max).await {
            Ok(Some(line)) => line,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("oml proxy: {e}; ending");
                return;
            }
        };
        let Ok(mut msg) = serde_json::from_slice::<Value>(&line) else {
            let _ = to_agent.send(line);
            continue;
        };
        let head = Head::of(&msg);
        let (queue, out) = match head.method() {
            Some(SUCCESSOR) => {
                let unwrapped = rpc::unwrap(msg);
                (&to_client, serde_json::to_vec(&unwrapped).unwrap_or(line))
            }
            Some(PROXY_INITIALIZE) => {
                if let Value::Object(m) = &mut msg {
                    m.insert("method".into(), "initialize".into());
                }
                (&to_agent, serde_json::to_vec(&msg).unwrap_or(line))
            }
            Some(_) => (&to_agent, line),
            None => {
                let id = head.id.as_ref().map(Value::to_string).unwrap_or_default();
                let from_agent = sides.open.lock().contains(&id) || sides.agent.awaits(&id);
                (if from_agent { &to_client } else { &to_agent }, line)
            }
        };
        if queue.send(out).is_err() {
            return;
        }
    }
}
