//! One turn of the chat, drawn: a prompt (its `@path` mentions attached) or a turn with no
//! prompt of its own, woken by what was posted to the session; the keys typed meanwhile
//! (`super::typing`), Ctrl-C, and the status line after it.
//!
//! It runs turns; when a turn is woken is the chat's business (`super::wake`).

use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::input::attach_mentions;
use super::surface::{self, Ask};
use super::{Chat, render, typing, without_nulls};
use crate::agent::{Agent, AgentEvent};
use crate::cancel::CancelToken;
use crate::front::stdio::err;

impl Chat {
    /// Run one prompt (or slash command) and draw it; with no `text`, the turn what was posted
    /// to the session wakes (`agent.resume`).
    pub(super) async fn prompt(
        &mut self,
        text: Option<&str>,
        events: &mut mpsc::UnboundedReceiver<AgentEvent>,
        asks: &mut mpsc::UnboundedReceiver<Ask>,
    ) {
        let text = text.map(|text| self.with_mentions(text));
        let started = std::time::Instant::now();
        let interrupt = CancelToken::new();
        let signals = tokio::spawn(watch_ctrl_c(
            self.agent.clone(),
            self.session.clone(),
            interrupt.clone(),
        ));
        let (done_tx, done_rx) = oneshot::channel();
        let agent = self.agent.clone();
        let id = self.session.clone();
        let run = async {
            let result = match &text {
                Some(text) => agent.prompt(&id, text, &interrupt).await,
                None => match agent.begin(&id) {
                    Ok(turn) => agent.resume(&turn, &interrupt).await,
                    Err(e) => Err(e),
                },
            };
            let _ = done_tx.send(());
            result
        };
        // On a terminal, keys typed during the turn are read (see `typing`).
        let (typing, keys) = match self.caps.interactive.then(typing::Typing::start) {
            Some(Some((typing, keys))) => (Some(typing), Some(keys)),
            _ => (None, None),
        };
        let turn =
            render::Turn::new(&mut self.screen, &agent, &id).with_keys(keys, interrupt.clone());
        let (result, tally) = tokio::join!(run, turn.watch(events, asks, done_rx));
        if let Some(typing) = typing {
            typing.stop();
        }
        signals.abort();
        self.after_typing(&id, &tally);
        match result {
            Ok(outcome) => {
                if outcome.command.is_none() {
                    self.status_line(&tally, &outcome.stop_reason, started.elapsed());
                }
                // The turn's notice said what is not saved; a piped chat ends with status 1.
                self.failed |= outcome.unsaved.is_some();
            }
            Err(e) => {
                self.failed = true;
                self.error(&e.to_string());
            }
        }
    }

    /// What was typed during the turn: a steered line the turn did not take (it ended first)
    /// runs next, then the queued lines, in order; a line not sent is named, not lost silently.
    fn after_typing(&mut self, id: &str, tally: &render::Tally) {
        let sessions = self.agent.sessions();
        let untaken: Vec<String> = tally
            .steered
            .iter()
            .filter(|(post, _)| sessions.unpost(id, *post).is_some())
            .map(|(_, text)| text.clone())
            .collect();
        for text in untaken.into_iter().rev() {
            self.pending.push_front(text);
        }
        self.pending.extend(tally.queued.iter().cloned());
        if !tally.typed.trim().is_empty() {
            let typed = surface::clean(&tally.typed);
            self.note(&format!("not sent (typed during the turn): {typed}"));
        }
    }

    /// `text` with the files its `@path` mentions attached, each named in a note; a slash
    /// command as it is.
    fn with_mentions(&mut self, text: &str) -> String {
        if text.starts_with('/') {
            return text.to_owned();
        }
        let cwd = self.cwd();
        let (text, mentions) = attach_mentions(text, &cwd);
        for m in mentions {
            match m.outcome {
                Ok(lines) => self.note(&format!("attached @{} ({lines} lines)", m.path)),
                Err(why) => self.note(&format!("not attached @{}: {why}", m.path)),
            }
        }
        text
    }

    fn status_line(
        &mut self,
        tally: &render::Tally,
        stop_reason: &str,
        elapsed: std::time::Duration,
    ) {
        if !self.caps.interactive {
            if crate::acp::StopReason::from_loop(stop_reason) != crate::acp::StopReason::EndTurn {
                err!("[stopped: {stop_reason}]");
            }
            return;
        }
        let lisp = self.agent.lisp();
        let window: Option<u64> = lisp.setting("llm.context-window").ok();
        let info = without_nulls(json!({
            "tokens": tally.tokens,
            "context": (tally.context > 0).then_some(tally.context),
            "window": window,
            "seconds": elapsed.as_secs_f64(),
            "stop-reason": stop_reason,
        }));
        let line = lisp
            .function("chat.status-line")
            .ok()
            .flatten()
            .and_then(|f| {
                let arg = crate::lisp::to_lua(lisp.lua(), &info).ok()?;
                f.call::<Option<String>>(arg).ok().flatten()
            });
        if let Some(line) = line {
            self.screen.lines(&line);
            self.screen.flush();
        }
    }
}

/// The first Ctrl-C cancels the session's turn (it ends properly, the partial answer kept);
/// the next one stops the Lisp code.
async fn watch_ctrl_c(agent: Agent, session: String, interrupt: CancelToken) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    agent.cancel(&session);
    if tokio::signal::ctrl_c().await.is_ok() {
        interrupt.cancel();
    }
}
