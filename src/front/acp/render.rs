//! From loop events to `session/update` notifications: each session's forwarder task, the
//! renderer that calls `acp.render-event` (or renders text deltas in Rust when that is the
//! default), and the typed payloads it sends.
//!
//! The forwarder keeps a session's updates in order and answers barriers, so a turn's updates are
//! queued before its response. Text (or thought) deltas already queued one after another are
//! sent as one update ([`MERGED_DELTA_MAX_BYTES`] at most): a model that streams faster than the
//! client reads gets fewer, longer chunks instead of a growing queue, and a slow one is sent as
//! it comes. A delta with nothing queued behind it lets the other tasks run once before it is
//! sent (one `yield_now`, no timer), so the deltas the stream is handing on join it. A running command's output is gathered into a bounded tail and
//! sent at most ten times a second. It knows nothing of requests or of what a session is doing.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::ctx::Ctx;
use super::hub::stable_order;
use crate::agent::AgentEvent;
use crate::jsonrpc::Connection;
use crate::lisp::{DefaultWatch, Lisp, from_lua, to_lua};

/// How often a running command's card gets its output tail at most.
pub const TOOL_OUTPUT_UPDATE_EVERY: Duration = Duration::from_millis(100);

/// Lines of a running command's output its card shows at most (the last ones).
pub const TOOL_OUTPUT_TAIL_LINES: usize = 20;

/// Bytes of a running command's output kept for its card at most.
pub const TOOL_OUTPUT_TAIL_BYTES: usize = 8 * 1024;

/// The most text one merged delta carries (see the module doc).
pub const MERGED_DELTA_MAX_BYTES: usize = 64 * 1024;

/// Turn the session's loop events into `session/update` notifications, in order; on a barrier
/// request, queue every event already emitted, then acknowledge. The output of a running tool
/// (`tool-output` events) is gathered into its tail and rendered at most every
/// [`TOOL_OUTPUT_UPDATE_EVERY`], always before the next other event.
pub(super) async fn forward(
    renderer: Renderer,
    conn: Connection,
    sid: String,
    mut events: mpsc::UnboundedReceiver<AgentEvent>,
    mut barriers: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
) {
    let mut tail = Tail::default();
    let mut held = None;
    loop {
        if let Some(event) = held.take() {
            let event = merge_queued(event, &mut events, &mut held);
            tail.event(&renderer, &conn, &sid, event).await;
            continue;
        }
        let due = tail.due();
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Some(event) => {
                    // A delta with nothing behind it yet: let the stream run once first, so
                    // that the deltas it is about to hand on go out with this one.
                    if events.is_empty() && is_delta(&event) {
                        tokio::task::yield_now().await;
                    }
                    let event = merge_queued(event, &mut events, &mut held);
                    tail.event(&renderer, &conn, &sid, event).await;
                }
                None => break,
            },
            ack = barriers.recv() => match ack {
                Some(ack) => {
                    while let Some(event) = held.take().or_else(|| events.try_recv().ok()) {
                        let event = merge_queued(event, &mut events, &mut held);
                        tail.event(&renderer, &conn, &sid, event).await;
                    }
                    tail.flush(&renderer, &conn, &sid).await;
                    renderer.expire();
                    renderer.ids.end();
                    let _ = ack.send(());
                }
                None => break,
            },
            () = tokio::time::sleep_until(due.unwrap_or_else(far_future)), if due.is_some() => {
                tail.flush(&renderer, &conn, &sid).await;
            }
        }
    }
}

/// `event` and, when it is a text or thought delta, the deltas of the same kind queued right
/// behind it, as one delta; merging stops once the text reaches [`MERGED_DELTA_MAX_BYTES`]. The first queued event that does not join is left in `held`, to go next.
fn merge_queued(
    event: AgentEvent,
    events: &mut mpsc::UnboundedReceiver<AgentEvent>,
    held: &mut Option<AgentEvent>,
) -> AgentEvent {
    let (mut text, thought) = match event {
        AgentEvent::TextDelta { text } => (text, false),
        AgentEvent::ThoughtDelta { text } => (text, true),
        other => return other,
    };
    while text.len() < MERGED_DELTA_MAX_BYTES {
        match events.try_recv() {
            Ok(AgentEvent::TextDelta { text: more }) if !thought => text.push_str(&more),
            Ok(AgentEvent::ThoughtDelta { text: more }) if thought => text.push_str(&more),
            Ok(other) => {
                *held = Some(other);
                break;
            }
            Err(_) => break,
        }
    }
    if thought {
        AgentEvent::ThoughtDelta { text }
    } else {
        AgentEvent::TextDelta { text }
    }
}

fn is_delta(event: &AgentEvent) -> bool {
    matches!(
        event,
        AgentEvent::TextDelta { .. } | AgentEvent::ThoughtDelta { .. }
    )
}

fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(3600)
}

/// The output tail of the running tool call, and when it was last sent.
#[derive(Default)]
struct Tail {
    id: Option<String>,
    text: String,
    /// The tail changed since it was last sent.
    pending: bool,
    /// The text is a whole view (`replace` events), which the card shows until its end.
    whole: bool,
    sent: Option<tokio::time::Instant>,
}

impl Tail {
    /// When the pending tail should go out.
    fn due(&self) -> Option<tokio::time::Instant> {
        self.pending.then(|| {
            self.sent
                .map_or_else(tokio::time::Instant::now, |t| t + TOOL_OUTPUT_UPDATE_EVERY)
        })
    }

    async fn event(
        &mut self,
        renderer: &Renderer,
        conn: &Connection,
        sid: &str,
        event: AgentEvent,
    ) {
        if let AgentEvent::ToolOutput { id, text, replace } = event {
            if self.whole && self.id.as_deref() != Some(id.as_str()) {
                // Cards updated side by side (sub-agents running in parallel): the other
                // card's view goes out before this one takes the tail.
                self.flush(renderer, conn, sid).await;
            }
            if replace || self.id.as_deref() != Some(id.as_str()) {
                let sent = self
                    .sent
                    .filter(|_| self.id.as_deref() == Some(id.as_str()));
                *self = Tail {
                    id: Some(id),
                    sent,
                    whole: replace,
                    ..Tail::default()
                };
            }
            self.push(&text);
            return;
        }
        if matches!(event, AgentEvent::ToolEnd { .. }) {
            // The end carries the whole result; a command's tail not yet sent would only flash,
            // but a whole view (a delegated agent's tool calls) is the card's record.
            if self.whole {
                self.flush(renderer, conn, sid).await;
            }
            *self = Tail::default();
        } else {
            self.flush(renderer, conn, sid).await;
        }
        send_event(renderer, conn, sid, &event).await;
    }

    fn push(&mut self, text: &str) {
        self.text.push_str(text);
        let lines: Vec<&str> = self.text.lines().collect();
        let mut keep = lines[lines.len().saturating_sub(TOOL_OUTPUT_TAIL_LINES)..].join("\n");
        if self.text.ends_with('\n') {
            keep.push('\n');
        }
        if keep.len() > TOOL_OUTPUT_TAIL_BYTES {
            let mut cut = keep.len() - TOOL_OUTPUT_TAIL_BYTES;
            while !keep.is_char_boundary(cut) {
                cut += 1;
            }
            keep.drain(..cut);
        }
        self.text = keep;
        self.pending = true;
    }

    async fn flush(&mut self, renderer: &Renderer, conn: &Connection, sid: &str) {
        if !self.pending {
            return;
        }
        self.pending = false;
        self.sent = Some(tokio::time::Instant::now());
        let event = AgentEvent::ToolOutput {
            id: self.id.clone().unwrap_or_default(),
            text: self.text.clone(),
            replace: true,
        };
        send_event(renderer, conn, sid, &event).await;
    }
}

pub(super) async fn send_event(
    renderer: &Renderer,
    conn: &Connection,
    sid: &str,
    event: &AgentEvent,
) {
    let message_id = renderer.ids.for_event(event);
    if let Some(mut update) = renderer.render(sid, event) {
        match &mut update {
            Rendered::Chunk(chunk) => chunk.message_id = message_id,
            Rendered::Lisp(value) => renderer.ids.stamp(value, message_id),
        }
        // A text or thought chunk has the same shape in both versions: no re-encoding.
        let dialect = match update {
            Rendered::Chunk(_) => super::v2::Dialect::V1,
            Rendered::Lisp(_) => renderer.dialect,
        };
        super::hub::send_update(dialect, conn, sid, update).await;
    }
}

/// One rendered update: by Rust for the default renderer's deltas, else what Lisp returned.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub(super) enum Rendered<'a> {
    Chunk(ChunkUpdate<'a>),
    Lisp(Value),
}

/// `agent_message_chunk` / `agent_thought_chunk` with a text block, keys in [`stable_order`].
#[derive(Debug, serde::Serialize)]
pub(super) struct ChunkUpdate<'a> {
    #[serde(rename = "sessionUpdate")]
    session_update: &'static str,
    content: TextBlock<'a>,
    #[serde(rename = "messageId", skip_serializing_if = "Option::is_none")]
    message_id: Option<String>,
}

#[derive(Debug, serde::Serialize)]
pub(super) struct TextBlock<'a> {
    r#type: &'static str,
    text: &'a str,
}

/// Renders loop events as `session/update` payloads through `acp.render-event`.
pub(super) struct Renderer {
    lisp: Lisp,
    /// The `messageId`s of the session's chunks.
    ids: super::message_ids::MessageIds,
    /// Whether `acp.render-event` is still the function acp.fnl defined (when it did).
    default: Option<DefaultWatch>,
    /// The version the connection speaks, settled before any session exists.
    dialect: super::v2::Dialect,
}

impl Renderer {
    /// The renderer of `ctx`'s Lisp host, watching for the default `acp.render-event` the hub
    /// kept.
    pub(super) fn new(ctx: &Ctx) -> Renderer {
        let mut renderer = Renderer::watching(ctx.lisp.clone(), ctx.hub.default_render());
        renderer.dialect = ctx.hub.dialect();
        renderer
    }

    fn watching(lisp: Lisp, default: Option<mlua::Function>) -> Renderer {
        let namespace = lisp.lua().globals().raw_get::<mlua::Table>("acp").ok();
        let default = default
            .zip(namespace)
            .map(|(f, acp)| DefaultWatch::new(acp, "render-event", f));
        Renderer {
            lisp,
            default,
            ids: super::message_ids::MessageIds::new(),
            dialect: super::v2::Dialect::V1,
        }
    }

    /// Look `acp.render-event` up again for the next event: the end of a burst (a barrier, so
    /// each turn starts from a fresh look).
    fn expire(&self) {
        if let Some(watch) = &self.default {
            watch.expire();
        }
    }

    /// `(acp.render-event event session-id)`, looked up now and called directly (it must not
    /// wait). While the name holds the default function, unadvised, the text and thought deltas
    /// (nearly every event of a turn) are rendered by [`chunk_update`] instead, which gives the
    /// same payload without crossing into Lua and back; a redefined or advised renderer sees
    /// every event. A failing renderer is logged and the event dropped: rendering never stops a
    /// turn.
    fn render<'e>(&self, sid: &str, event: &'e AgentEvent) -> Option<Rendered<'e>> {
        if self
            .default
            .as_ref()
            .is_some_and(DefaultWatch::holds_default)
            && let Some(update) = chunk_update(event)
        {
            return Some(Rendered::Chunk(update));
        }
        // Anything else (a callable table too) is resolved as the name is everywhere.
        let f = self.lisp.function("acp.render-event").ok().flatten()?;
        self.render_in_lisp(&f, sid, event).map(Rendered::Lisp)
    }

    /// `(f event sid)` with the event as a Lua table, its answer as a JSON update or `None`.
    fn render_in_lisp(&self, f: &mlua::Function, sid: &str, event: &AgentEvent) -> Option<Value> {
        let lua = self.lisp.lua();
        let event = serde_json::to_value(event).ok()?;
        let arg = to_lua(lua, &event).ok()?;
        match f.call::<mlua::Value>((arg, sid)) {
            Ok(mlua::Value::Nil) => None,
            Ok(v) => match from_lua(lua, v) {
                Ok(Value::Null) => None,
                Ok(update) => Some(stable_order(update, "sessionUpdate")),
                Err(e) => {
                    tracing::warn!("acp.render-event returned something that is not JSON: {e}");
                    None
                }
            },
            Err(e) => {
                tracing::warn!("acp.render-event failed: {}", e.to_string());
                None
            }
        }
    }
}

/// What the default `acp.render-event` makes of a text or thought delta; `None` for the other
/// events, which always go through Lisp.
pub(super) fn chunk_update(event: &AgentEvent) -> Option<ChunkUpdate<'_>> {
    let (session_update, text) = match event {
        AgentEvent::TextDelta { text } => ("agent_message_chunk", text),
        AgentEvent::ThoughtDelta { text } => ("agent_thought_chunk", text),
        AgentEvent::ToolStart { .. }
        | AgentEvent::ToolEnd { .. }
        | AgentEvent::ToolOutput { .. }
        | AgentEvent::Notice { .. }
        | AgentEvent::UserMessage { .. }
        | AgentEvent::Plan { .. }
        | AgentEvent::Usage { .. } => {
            return None;
        }
    };
    Some(ChunkUpdate {
        session_update,
        content: TextBlock {
            r#type: "text",
            text,
        },
        message_id: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Agent;
    use serde_json::json;

    /// Queued deltas of one kind become one, in order; any other event ends the run and goes
    /// next, unchanged.
    #[test]
    fn queued_deltas_merge_without_reordering() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let text = |t: &str| AgentEvent::TextDelta { text: t.into() };
        let thought = |t: &str| AgentEvent::ThoughtDelta { text: t.into() };
        for e in [
            text("b"),
            text("c"),
            thought("t1"),
            thought("t2"),
            text("d"),
        ] {
            tx.send(e).unwrap();
        }
        tx.send(AgentEvent::Notice { text: "n".into() }).unwrap();
        tx.send(text("e")).unwrap();
        let mut held = None;
        let mut out = Vec::new();
        let mut next = Some(text("a"));
        while let Some(event) = next
            .take()
            .or_else(|| held.take())
            .or_else(|| rx.try_recv().ok())
        {
            out.push(merge_queued(event, &mut rx, &mut held));
        }
        let shown: Vec<String> = out.iter().map(|e| format!("{e:?}")).collect();
        assert_eq!(
            shown,
            [
                format!("{:?}", text("abc")),
                format!("{:?}", thought("t1t2")),
                format!("{:?}", text("d")),
                format!("{:?}", AgentEvent::Notice { text: "n".into() }),
                format!("{:?}", text("e")),
            ]
        );
    }

    #[test]
    fn updates_have_a_stable_key_order() {
        let v = json!({"b": 1, "sessionUpdate": "x", "a": {"z": 1, "type": "t"}});
        assert_eq!(
            stable_order(v, "sessionUpdate").to_string(),
            r#"{"sessionUpdate":"x","a":{"type":"t","z":1},"b":1}"#
        );
    }

    #[test]
    fn deltas_rendered_in_rust_are_what_the_default_renderer_gives() {
        let lisp = Lisp::new(crate::lisp::LispOptions {
            output: crate::lisp::Output::Stderr,
            cache_dir: None,
        })
        .expect("the Lisp host starts");
        Agent::install(&lisp).expect("the agent installs");
        let hub = crate::front::acp::install(&lisp).expect("the ACP layer installs");
        let default = hub
            .default_render()
            .expect("acp.fnl defines acp.render-event");
        let renderer = Renderer::watching(lisp, Some(default.clone()));
        let texts = [
            "",
            "x",
            "héllo \"quoted\" \\ back\nslash\ttab",
            "\u{1F600} \u{0}",
        ];
        for text in texts {
            for event in [
                AgentEvent::TextDelta { text: text.into() },
                AgentEvent::ThoughtDelta { text: text.into() },
            ] {
                let in_lisp = renderer.render_in_lisp(&default, "s1", &event);
                let in_rust = chunk_update(&event);
                assert_eq!(
                    in_rust.map(|u| serde_json::to_string(&u).expect("serializes")),
                    in_lisp.map(|v| v.to_string()),
                    "{event:?}"
                );
            }
        }
        let tool_end = AgentEvent::ToolEnd {
            id: "c1".into(),
            content: "done".into(),
            is_error: false,
            diff: None,
            exit: None,
            terminal_id: None,
            meta: None,
        };
        assert!(
            chunk_update(&tool_end).is_none(),
            "only deltas take the fast path"
        );
    }
}
