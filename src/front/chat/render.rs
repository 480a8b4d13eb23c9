//! One turn on the screen: the loop events of the chat's session drawn as they arrive — the
//! answer through [`Markdown`], reasoning folded to one line (or shown dimmed), a card per tool
//! call with its live output tail, the spinner while nothing arrives — and the permission
//! questions `chat.ask-key!` sends, answered with one key.
//!
//! The card lines, the body under a finished card and the status line come from the Lisp
//! functions `chat.card-header`, `chat.card-body` and `chat.status-line`, called by name for
//! each card; a failing one is logged and a plain line drawn instead, so rendering never stops a
//! turn. It does not run the turn; it only watches it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::markdown::Markdown;
use super::screen::Screen;
use super::surface::{Ask, clean};
use super::term::{self, Key};
use super::typing::Typed;
use crate::agent::{Agent, AgentEvent};
use crate::cancel::CancelToken;
use crate::lisp::{Lisp, from_lua, to_lua};
use crate::session::inbox::PostId;

/// How long nothing must arrive before the spinner shows.
pub const SPINNER_DELAY: Duration = Duration::from_millis(200);

/// How often the spinner, the folded reasoning and the live tail are redrawn at most.
const REDRAW_EVERY: Duration = Duration::from_millis(80);

/// Bytes of a running command's unfinished last line kept for the live tail.
const PARTIAL_LINE_MAX_BYTES: usize = 1024;

/// Characters of reasoning kept for its folded line.
const THOUGHT_TAIL_CHARS: usize = 200;

/// Characters of the line typed during a turn that the spinner line shows, at most (its end).
const TYPED_SHOWN_CHARS: usize = 40;

/// What a turn reported, for the status line, and what was typed while it ran.
#[derive(Debug, Default)]
pub struct Tally {
    /// Prompt and completion tokens of every model call of the turn.
    pub tokens: u64,
    /// What the context held after the last call (its prompt and completion tokens).
    pub context: u64,
    /// The answer's text since the last tool call.
    pub text: String,
    /// Lines queued with Enter while the turn ran, in order.
    pub queued: Vec<String>,
    /// Lines steered into the turn (posted to its session's inbox), with their posts.
    pub steered: Vec<(PostId, String)>,
    /// What was typed and not sent when the turn ended.
    pub typed: String,
}

/// The turn's drawing state.
pub struct Turn<'a> {
    screen: &'a mut Screen,
    lisp: Lisp,
    agent: Agent,
    session: String,
    md: Markdown,
    show_reasoning: bool,
    tail_lines: usize,
    thought: Option<Thought>,
    card: Option<Card>,
    tally: Tally,
    last_event: Instant,
    started: Instant,
    frame: usize,
    /// The keys typed during the turn, when the terminal gives them (see [`super::typing`]).
    keys: Option<mpsc::UnboundedReceiver<Typed>>,
    /// The hard stop a second Ctrl-C typed during the turn gives.
    interrupt: CancelToken,
    /// Ctrl-C typed during the turn so far.
    ctrl_c: u8,
    /// Enter steers a line typed during the turn too (`agent.prompt-while-busy` `:steer`).
    enter_steers: bool,
}

struct Thought {
    since: Instant,
    tail: String,
}

struct Card {
    start: Value,
    lines: VecDeque<String>,
    partial: String,
    dirty: bool,
}

impl<'a> Turn<'a> {
    pub fn new(screen: &'a mut Screen, agent: &Agent, session: &str) -> Turn<'a> {
        let lisp = agent.lisp().clone();
        let show_reasoning = lisp.setting("chat.show-reasoning?").unwrap_or(false);
        let tail_lines: i64 = lisp.setting("chat.tool-output-lines").unwrap_or(5);
        let while_busy: String = lisp.setting("agent.prompt-while-busy").unwrap_or_default();
        let color = screen.caps().color;
        Turn {
            screen,
            lisp,
            agent: agent.clone(),
            session: session.to_owned(),
            md: Markdown::new(color),
            show_reasoning,
            tail_lines: tail_lines.clamp(0, 50) as usize,
            thought: None,
            card: None,
            tally: Tally::default(),
            last_event: Instant::now(),
            started: Instant::now(),
            frame: 0,
            keys: None,
            interrupt: CancelToken::new(),
            ctrl_c: 0,
            enter_steers: while_busy == "steer",
        }
    }

    /// Read the keys typed during the turn from `keys` (Ctrl-C cancels it, twice `interrupt`s
    /// it; a line is queued or steered; questions read their key there too).
    pub fn with_keys(
        mut self,
        keys: Option<mpsc::UnboundedReceiver<Typed>>,
        interrupt: CancelToken,
    ) -> Turn<'a> {
        self.keys = keys;
        self.interrupt = interrupt;
        self
    }

    /// Draw the events until `done` fires (the turn has returned) and every event sent before
    /// it is drawn, answering the questions that arrive meanwhile.
    pub async fn watch(
        mut self,
        events: &mut mpsc::UnboundedReceiver<AgentEvent>,
        asks: &mut mpsc::UnboundedReceiver<Ask>,
        mut done: oneshot::Receiver<()>,
    ) -> Tally {
        let mut tick = tokio::time::interval(REDRAW_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut keys = self.keys.take();
        loop {
            tokio::select! {
                biased;
                Some(event) = events.recv() => self.event(event),
                Some(ask) = asks.recv() => self.ask(ask, keys.as_mut()).await,
                Some(key) = typed_key(keys.as_mut()) => self.key(key),
                _ = &mut done => {
                    while let Ok(event) = events.try_recv() {
                        self.event(event);
                    }
                    break;
                }
                _ = tick.tick() => self.redraw(),
            }
        }
        self.end_text();
        self.screen.finish();
        self.tally
    }

    fn event(&mut self, event: AgentEvent) {
        self.last_event = Instant::now();
        match event {
            AgentEvent::TextDelta { text } => {
                self.end_thought();
                self.tally.text.push_str(&text);
                let drawn = self.md.push(&clean(&text));
                self.screen.text(&drawn);
            }
            AgentEvent::ThoughtDelta { text } => self.thought_delta(&text),
            AgentEvent::ToolStart { .. } => {
                self.end_text();
                self.tally.text.clear();
                let start = serde_json::to_value(&event).unwrap_or(Value::Null);
                let header = self.lisp_line("chat.card-header", &start, "running");
                self.screen.set_width(term::width());
                self.screen.card_header(&header);
                self.card = Some(Card {
                    start,
                    lines: VecDeque::new(),
                    partial: String::new(),
                    dirty: false,
                });
            }
            AgentEvent::ToolOutput { text, replace, .. } => {
                if let Some(card) = &mut self.card {
                    if replace {
                        card.lines.clear();
                        card.partial.clear();
                    }
                    card.push(&text, self.tail_lines);
                }
            }
            AgentEvent::ToolEnd { .. } => self.end_card(&event),
            AgentEvent::Plan { entries } => {
                self.end_text();
                let plan = self.lisp_text("chat.render-plan", &[entries]);
                if let Some(plan) = plan {
                    self.screen.lines(&plan);
                }
            }
            AgentEvent::Notice { text } => {
                self.end_text();
                let line = self.dim(&clean(&text));
                self.screen.lines(&line);
            }
            AgentEvent::UserMessage { text, .. } => {
                // A line that joined the turn (steered, a background task's result): shown as
                // typed input is.
                self.end_text();
                self.tally.text.clear();
                self.screen
                    .lines(&format!("{}{}", super::PROMPT, clean(&text)));
            }
            AgentEvent::Usage { usage } => {
                let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
                let used = match usage.get("total_tokens").and_then(Value::as_u64) {
                    Some(total) => total,
                    None => n("prompt_tokens") + n("completion_tokens"),
                };
                self.tally.tokens += used;
                self.tally.context = used;
            }
        }
    }

    fn thought_delta(&mut self, text: &str) {
        let text = clean(text);
        if self.show_reasoning {
            let drawn = if self.screen.caps().color {
                format!("\x1b[2m{text}\x1b[0m")
            } else {
                text
            };
            self.screen.text(&drawn);
            return;
        }
        let thought = self.thought.get_or_insert_with(|| Thought {
            since: Instant::now(),
            tail: String::new(),
        });
        thought.tail.push_str(&text);
        let excess = thought
            .tail
            .chars()
            .count()
            .saturating_sub(THOUGHT_TAIL_CHARS);
        if excess > 0 {
            thought.tail = thought.tail.chars().skip(excess).collect();
        }
    }

    /// The folded reasoning is over: one line says how long it took.
    fn end_thought(&mut self) {
        if let Some(thought) = self.thought.take() {
            let line = format!("✻ Thought for {}s", thought.since.elapsed().as_secs());
            self.screen.status_row(None);
            self.screen.lines(&self.dim(&line));
        }
    }

    fn end_text(&mut self) {
        self.end_thought();
        let rest = self.md.finish();
        self.screen.text(&rest);
    }

    fn end_card(&mut self, end: &AgentEvent) {
        self.end_thought();
        let mut event = self
            .card
            .take()
            .map(|c| c.start)
            .unwrap_or_else(|| json!({}));
        if let (Value::Object(merged), Ok(Value::Object(end))) =
            (&mut event, serde_json::to_value(end))
        {
            for (k, v) in end {
                if k != "type" {
                    merged.insert(k, v);
                }
            }
        }
        let failed = event
            .get("error?")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let status = if failed { "failed" } else { "ok" };
        let header = self.lisp_line("chat.card-header", &event, status);
        let body = self.lisp_text("chat.card-body", &[event.clone()]);
        self.screen.end_card(&header, body.as_deref());
        self.screen.flush();
    }

    fn redraw(&mut self) {
        if let Some(card) = &mut self.card
            && card.dirty
        {
            card.dirty = false;
            let lines = card.shown(self.tail_lines);
            self.screen.tail(&lines);
        }
        if let Some(thought) = &self.thought {
            let tail: String = thought.tail.chars().filter(|c| *c != '\n').collect();
            let line = format!("✻ Thinking… {tail}");
            let line = self.dim(&super::screen::fit(&line, term::width().saturating_sub(1)));
            self.screen.status_row(Some(&line));
        } else if self.last_event.elapsed() >= SPINNER_DELAY {
            let label = if self.card.is_some() {
                "running"
            } else {
                "working"
            };
            let typed = &self.tally.typed;
            let skip = typed.chars().count().saturating_sub(TYPED_SHOWN_CHARS);
            let typed: String = typed.chars().skip(skip).collect();
            let typed = clean(&typed);
            self.screen
                .spin(self.frame, self.started.elapsed(), label, &typed);
            self.frame += 1;
        }
        self.screen.flush();
    }

    /// A permission question: shown, then one key read on the terminal (Enter answers the
    /// first key; Ctrl-C or Esc cancels the turn).
    async fn ask(&mut self, ask: Ask, typed: Option<&mut mpsc::UnboundedReceiver<Typed>>) {
        self.end_text();
        let keys: Vec<char> = ask.keys.chars().collect();
        let answer = match typed {
            // The turn reads the keys already: those typed before the question shows are
            // dropped, the ones after answer it.
            Some(typed) => {
                while typed.try_recv().is_ok() {}
                self.draw_question(&ask.question);
                typed_one_of(typed, &keys).await
            }
            None => {
                // Raw mode first: keys typed before the question shows are dropped, the ones
                // after are read.
                let raw = term::RawInput::start();
                self.draw_question(&ask.question);
                match raw {
                    Some(raw) => tokio::task::spawn_blocking(move || one_of(&raw, &keys))
                        .await
                        .unwrap_or(None),
                    None => None,
                }
            }
        };
        let word = match answer {
            Some('y') => "yes".to_owned(),
            Some('a') => "always".to_owned(),
            Some('n') => "no".to_owned(),
            Some(c) => c.to_string(),
            None => "cancelled".to_owned(),
        };
        self.screen.text(&format!("{word}\n"));
        self.screen.flush();
        if answer.is_none() {
            self.agent.cancel(&self.session);
        } else if let Some(card) = self.card.as_ref().filter(|_| self.screen.caps().cursor) {
            // The question came between the card and its output: the card again, so that the
            // live output and the final mark sit under it.
            let header = self.lisp_line("chat.card-header", &card.start, "running");
            self.screen.card_header(&header);
        }
        let _ = ask.reply.send(answer);
        self.last_event = Instant::now();
    }

    fn draw_question(&mut self, question: &str) {
        self.screen.lines(question);
        self.screen.text("› ");
        self.screen.flush();
    }

    /// A key typed during the turn: the line edited, queued (Enter) or steered into the turn
    /// ([`super::typing::STEER_KEY`], or Enter with `agent.prompt-while-busy` `:steer`; a slash
    /// command, form or chat command is queued instead, being no text for the model), Ctrl-C
    /// cancelling the turn (twice: its Lisp code).
    fn key(&mut self, key: Typed) {
        let line = &mut self.tally.typed;
        match key {
            Typed::Char(c) => line.push(c),
            Typed::Backspace => {
                line.pop();
            }
            Typed::Enter | Typed::Steer if line.trim().is_empty() => {}
            Typed::Enter | Typed::Steer => {
                let text = std::mem::take(line);
                let input = text.trim_start();
                let steer = (key == Typed::Steer || self.enter_steers)
                    && !input.starts_with(['/', '(', ',']);
                let post = steer.then(|| {
                    let message = json!({"role": "user", "content": text});
                    self.agent.sessions().post(&self.session, message)
                });
                let shown = match post.flatten() {
                    Some(post) => {
                        self.tally.steered.push((post, text.clone()));
                        format!("steering › {}", clean(&text))
                    }
                    None => {
                        self.tally.queued.push(text.clone());
                        format!("queued › {}", clean(&text))
                    }
                };
                self.end_text();
                let shown = self.dim(&shown);
                self.screen.lines(&shown);
            }
            Typed::Interrupt => {
                self.ctrl_c = self.ctrl_c.saturating_add(1);
                if self.ctrl_c == 1 {
                    self.agent.cancel(&self.session);
                } else {
                    self.interrupt.cancel();
                }
            }
            Typed::Escape => {}
        }
        self.redraw();
    }

    fn dim(&self, text: &str) -> String {
        if self.screen.caps().color {
            format!("\x1b[2m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// `(name event status)`, or a plain line naming the tool when it fails.
    fn lisp_line(&self, name: &str, event: &Value, status: &str) -> String {
        self.lisp_text(name, &[event.clone(), json!(status)])
            .unwrap_or_else(|| {
                let tool = event.get("name").and_then(Value::as_str).unwrap_or("tool");
                format!("{status}: {}", clean(tool))
            })
    }

    /// Call the Lisp function `name` with `args` now; its string result.
    fn lisp_text(&self, name: &str, args: &[Value]) -> Option<String> {
        let lua = self.lisp.lua();
        let f = self.lisp.function(name).ok().flatten()?;
        let mut values = mlua::MultiValue::new();
        for a in args {
            values.push_back(to_lua(lua, a).ok()?);
        }
        match f.call::<mlua::Value>(values) {
            Ok(mlua::Value::Nil) => None,
            Ok(v) => from_lua(lua, v)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned)),
            Err(e) => {
                tracing::warn!("{name} failed: {e}");
                None
            }
        }
    }
}

/// The key of `keys` pressed (Enter gives the first); `None` when the question is cancelled.
/// The next key typed, or never when the terminal gives none.
async fn typed_key(keys: Option<&mut mpsc::UnboundedReceiver<Typed>>) -> Option<Typed> {
    match keys {
        Some(keys) => keys.recv().await,
        None => std::future::pending().await,
    }
}

/// [`one_of`] on the keys the turn reads.
async fn typed_one_of(typed: &mut mpsc::UnboundedReceiver<Typed>, keys: &[char]) -> Option<char> {
    loop {
        match typed.recv().await? {
            Typed::Enter => return keys.first().copied(),
            Typed::Char(c) if keys.contains(&c.to_ascii_lowercase()) => {
                return Some(c.to_ascii_lowercase());
            }
            Typed::Interrupt | Typed::Escape => return None,
            Typed::Char(_) | Typed::Backspace | Typed::Steer => {}
        }
    }
}

fn one_of(raw: &term::RawInput, keys: &[char]) -> Option<char> {
    loop {
        match raw.read_key() {
            Key::Enter => return keys.first().copied(),
            Key::Char(c) if keys.contains(&c.to_ascii_lowercase()) => {
                return Some(c.to_ascii_lowercase());
            }
            Key::Char(_) => continue,
            Key::Cancel | Key::Gone => return None,
        }
    }
}

impl Card {
    /// Add a piece of the running command's output, keeping its last `keep` lines.
    fn push(&mut self, text: &str, keep: usize) {
        if keep == 0 {
            return;
        }
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        self.partial.push_str(&clean(&text));
        while let Some(at) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=at).collect();
            self.lines.push_back(line.trim_end_matches('\n').to_owned());
            if self.lines.len() > keep {
                self.lines.pop_front();
            }
        }
        let excess = self.partial.len().saturating_sub(PARTIAL_LINE_MAX_BYTES);
        if excess > 0 {
            let cut = (excess..self.partial.len())
                .find(|i| self.partial.is_char_boundary(*i))
                .unwrap_or(self.partial.len());
            self.partial.drain(..cut);
        }
        self.dirty = true;
    }

    /// The lines the live tail shows: the last complete ones and the line being written.
    fn shown(&self, keep: usize) -> Vec<String> {
        let mut lines: Vec<String> = self.lines.iter().cloned().collect();
        if !self.partial.is_empty() {
            lines.push(self.partial.clone());
        }
        let skip = lines.len().saturating_sub(keep);
        lines.split_off(skip)
    }
}
