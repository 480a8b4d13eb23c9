//! The terminal chat (`oml` on a terminal): a conversation with the agent in the current
//! directory, turn after turn, with the live Lisp image one `(` away.
//!
//! Each input is parsed once (`input`): a Fennel form is evaluated in the image, bound to the
//! chat's session; `,name` is a chat command; anything else is a prompt (slash commands
//! included) run by `agent.prompt` while `render` draws its events. While a turn runs, the keys
//! typed are read (`typing`): Enter queues the line for a turn of its own, Ctrl-S steers it into
//! the running turn (the session's inbox). What is posted to the session while the chat waits at
//! its prompt (a background task's result) wakes it (`wake`): a turn with no prompt of its own
//! (`turn`) answers it at once, and what was typed comes back after. Ctrl-C cancels the running
//! turn (twice: stops the Lisp code) and the chat goes on; Ctrl-C twice on an empty line, or
//! Ctrl-D, ends it. Each chat is a stored session (`sessions`), so `oml -c` and `oml acp`'s
//! `session/load` go on with it. With stdin piped, lines are read by the same rules and drawn
//! without decoration.
//!
//! Compare with pi: `packages/coding-agent/src/modes/interactive/`; with Claude Code: `claude`
//! without `-p`.

mod editor;
mod input;
mod lisp;
mod markdown;
mod render;
mod screen;
mod sessions;
pub mod surface;
mod term;
mod turn;
mod typing;
mod wake;

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::mpsc;

use crate::agent::{Agent, AgentEvent};
use crate::cancel::CancelToken;
use crate::front::signals::Shutdown;
use crate::front::stdio::err;
use crate::lisp::LispError;
use crate::lisp::repl::Said;
use crate::session::store::Store;
use editor::{Names, Read, Reader};
use input::{Input, classify, join};
use lisp::Repl;
use screen::Screen;
use surface::{Ask, Hub, Request};
use term::Caps;

pub use sessions::Start;

/// The prompt the chat reads input after, on a terminal.
pub const PROMPT: &str = "› ";

/// Lisp names offered for completion at most.
const COMPLETION_NAMES_MAX: usize = 5000;

/// What `oml` was asked to open.
#[derive(Clone, Debug, Default)]
pub struct ChatOptions {
    /// Which session to open.
    pub start: Start,
    /// Where sessions are stored; `None` keeps them in memory (`--no-session`).
    pub store: Option<Store>,
    /// The model of the chat's sessions (`--model`); `None` keeps `agent.current-model`.
    pub model: Option<String>,
    /// The permission mode (`--mode`); `None` keeps `agent.permission-mode`.
    pub mode: Option<String>,
    /// The input history file.
    pub history: Option<PathBuf>,
}

/// Run the chat until the input ends; returns the exit status (0, or 1 when an input read
/// from a pipe failed).
pub async fn run(agent: &Agent, hub: Arc<Hub>, options: ChatOptions) -> i32 {
    let caps = Caps::detect();
    hub.set_color(caps.color);
    hub.set_width(term::width());
    hub.set_store(options.store.clone());
    agent.sessions().set_store(options.store.clone());
    let (tx, mut events) = mpsc::unbounded_channel();
    let (ask_tx, mut asks) = mpsc::unbounded_channel::<Ask>();
    if caps.interactive {
        hub.set_asks(ask_tx);
    }
    let mut chat = Chat {
        agent: agent.clone(),
        hub,
        caps,
        screen: Screen::new(caps, term::width()),
        tx,
        session: String::new(),
        options: options.clone(),
        failed: false,
        repl: None,
        pending: Default::default(),
        left_posts: 0,
    };
    let opened = match sessions::open(&chat.agent, &options, caps, chat.tx.clone()).await {
        Ok(opened) => opened,
        Err(message) => {
            err!("oml: {message}");
            return 1;
        }
    };
    chat.session = opened.id.clone();
    chat.start_mcp().await;
    if caps.interactive {
        chat.welcome(opened.resumed).await;
    }
    let names = Arc::new(Mutex::new(Names::default()));
    let reader = if caps.interactive {
        let size: i64 = agent.lisp().setting("chat.history-size").unwrap_or(1000);
        Reader::terminal(options.history.clone(), size.max(0) as usize, names.clone())
    } else {
        Reader::piped()
    };
    let modes = term::SavedModes::save();
    let mut shutdown = Shutdown::listen();
    let signal = chat
        .converse(&reader, &names, &mut events, &mut asks, &mut shutdown)
        .await;
    if signal.is_some() {
        // The line editor may hold the terminal in raw mode, waiting for a key.
        modes.restore();
        reader.abandon();
    } else {
        reader.close().await;
    }
    if let Some(repl) = chat.repl.take() {
        repl.close();
    }
    if let Some(unsaved) = agent.sessions().flush(&chat.session).await.unsaved {
        chat.error(&format!("{unsaved}; they are lost as oml ends"));
        chat.failed = true;
    }
    match signal {
        Some(signal) => crate::front::signals::status_for(signal),
        None => i32::from(chat.failed && !caps.interactive),
    }
}

/// Whether the conversation goes on after an input.
#[derive(PartialEq, Eq)]
enum Flow {
    Go,
    Exit,
}

struct Chat {
    agent: Agent,
    hub: Arc<Hub>,
    caps: Caps,
    screen: Screen,
    /// The sink every session of the chat sends its events to.
    tx: mpsc::UnboundedSender<AgentEvent>,
    session: String,
    options: ChatOptions,
    /// An input failed (a model or Lisp error).
    failed: bool,
    /// The Lisp conversation, from the first form on.
    repl: Option<Repl>,
    /// Lines typed during a turn that wait for their own (see [`typing`]), run before the next
    /// line is read.
    pending: std::collections::VecDeque<String>,
    /// The session's post count when a woken turn last ended without taking what was posted
    /// (see `wake`): no turn wakes for those again.
    left_posts: u64,
}

impl Chat {
    /// Read and run inputs until the input ends or a SIGTERM or SIGHUP comes (its number is
    /// returned; a turn it interrupts is cancelled and finishes first).
    async fn converse(
        &mut self,
        reader: &Reader,
        names: &Arc<Mutex<Names>>,
        events: &mut mpsc::UnboundedReceiver<AgentEvent>,
        asks: &mut mpsc::UnboundedReceiver<Ask>,
        shutdown: &mut Shutdown,
    ) -> Option<i32> {
        let mut interrupted_empty = false;
        loop {
            if self.caps.interactive {
                self.refresh_names(names);
            }
            let prompt = if self.caps.interactive { PROMPT } else { "" };
            let read = match self.pending.pop_front() {
                // A line typed during the last turn: shown as if typed now.
                Some(line) => {
                    self.screen
                        .lines(&format!("{PROMPT}{}", surface::clean(&line)));
                    Read::Line(line)
                }
                // Posted and not taken (the last turn ended first): answered before a read.
                None if self.has_posted() => Read::Woken { kept: false },
                None => match self.read_or_wake(reader, prompt, shutdown).await {
                    Ok(read) => read,
                    Err(signal) => return Some(signal),
                },
            };
            let text = match read {
                Read::Eof => break,
                Read::Woken { kept } => {
                    if let Some(signal) = self.woken_turn(kept, events, asks, shutdown).await {
                        return Some(signal);
                    }
                    self.handle_requests().await;
                    continue;
                }
                Read::Interrupted { empty } => {
                    if empty && interrupted_empty {
                        break;
                    }
                    interrupted_empty = empty;
                    if empty {
                        self.note("(Ctrl-C again or Ctrl-D to exit)");
                    }
                    continue;
                }
                Read::Line(text) => text,
            };
            interrupted_empty = false;
            let flow = match classify(&join(&text)) {
                Input::Empty => Flow::Go,
                Input::Lisp(src) => {
                    self.eval(&src).await;
                    Flow::Go
                }
                Input::Chat { name, args } => self.chat_command(&name, &args).await,
                Input::Prompt(text) => match self.turn(Some(&text), events, asks, shutdown).await {
                    Some(signal) => return Some(signal),
                    None => Flow::Go,
                },
            };
            if flow == Flow::Exit {
                break;
            }
            self.handle_requests().await;
        }
        None
    }

    /// Run the turn of `text` (or, with `None`, the turn what was posted wakes) until it ends or a SIGTERM or
    /// SIGHUP comes (its number; the turn is cancelled and finishes first).
    async fn turn(
        &mut self,
        text: Option<&str>,
        events: &mut mpsc::UnboundedReceiver<AgentEvent>,
        asks: &mut mpsc::UnboundedReceiver<Ask>,
        shutdown: &mut Shutdown,
    ) -> Option<i32> {
        let (agent, session) = (self.agent.clone(), self.session.clone());
        let turn = self.prompt(text, events, asks);
        tokio::pin!(turn);
        tokio::select! {
            () = &mut turn => None,
            signal = shutdown.recv() => {
                agent.cancel(&session);
                turn.await;
                Some(signal)
            }
        }
    }

    /// Evaluate Fennel source (or a `,` REPL command) in the chat's REPL conversation, which
    /// starts at the first use; what it writes is shown as it comes, errors in red.
    async fn eval(&mut self, src: &str) {
        if self.repl.is_none() {
            self.repl = Some(Repl::start(
                self.agent.lisp(),
                self.agent.sessions().clone(),
                &self.session,
            ));
        }
        let Some(repl) = self.repl.as_mut() else {
            return;
        };
        let interrupt = repl.interrupt();
        let signals = tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                interrupt.interrupt();
            }
        });
        let (screen, color) = (&mut self.screen, self.caps.color);
        let mut failed = false;
        let alive = repl
            .eval(src, |said| {
                let error = matches!(said, Said::Failed { .. });
                failed |= error;
                let text = said.text();
                if error && color {
                    screen.text(&format!("\x1b[31m{text}\x1b[0m"));
                } else {
                    screen.text(&text);
                }
                screen.flush();
            })
            .await;
        signals.abort();
        self.failed |= failed;
        if !alive {
            self.repl = None;
            self.error("the Lisp conversation ended; the next form starts a new one");
        }
    }

    async fn chat_command(&mut self, name: &str, args: &str) -> Flow {
        match name {
            "exit" | "quit" => return Flow::Exit,
            "help" => {
                self.screen.lines(HELP);
                self.screen.flush();
                self.eval(",help").await;
            }
            _ => self.eval(format!(",{name} {args}").trim_end()).await,
        }
        Flow::Go
    }

    /// Start the declared MCP servers of the current session (in the background).
    async fn start_mcp(&self) {
        let cwd = self.cwd();
        crate::bind::mcp::start_session(self.agent.lisp(), &self.session, &cwd, Vec::new()).await;
    }

    /// Act on what `/new` and `/resume` asked for.
    async fn handle_requests(&mut self) {
        for request in self.hub.take_requests() {
            let id = match request {
                Request::NewSession => {
                    let cwd = self.cwd();
                    match self.agent.try_new_session(cwd, Some(self.tx.clone())) {
                        Ok(id) => id,
                        Err(e) => {
                            self.error(&e.to_string());
                            continue;
                        }
                    }
                }
                Request::Resume(id) => match self.agent.sessions().load(&id, Some(self.tx.clone()))
                {
                    Ok(_) => id,
                    Err(e) => {
                        self.error(&format!("cannot load session {id}: {e}"));
                        continue;
                    }
                },
            };
            sessions::configure(&self.agent, &id, &self.options);
            if let Some(repl) = &self.repl {
                repl.rebind(&id);
            }
            let old = std::mem::replace(&mut self.session, id);
            self.left_posts = 0;
            self.agent.sessions().flush(&old).await;
            crate::bind::mcp::stop_session(self.agent.lisp(), &old).await;
            self.agent.sessions().remove(&old);
            self.start_mcp().await;
            self.note(&format!("session {}", self.session));
        }
    }

    async fn welcome(&mut self, resumed: bool) {
        let model = self
            .agent
            .lisp()
            .call_json(
                "agent.current-model",
                &[json!(self.session)],
                &CancelToken::new(),
            )
            .await
            .ok()
            .filter(|m| !m.is_null());
        let info = without_nulls(json!({
            "version": env!("CARGO_PKG_VERSION"),
            "model": model,
            "cwd": self.cwd().display().to_string(),
            "session": self.session,
            "resumed": resumed,
        }));
        match self
            .agent
            .lisp()
            .call_json("chat.welcome", &[info], &CancelToken::new())
            .await
        {
            Ok(serde_json::Value::String(text)) => self.screen.lines(&text),
            Ok(_) => {}
            Err(e) => self.lisp_error(&e),
        }
        self.screen.flush();
    }

    fn refresh_names(&self, names: &Arc<Mutex<Names>>) {
        let (commands, lisp) = sessions::completion_names(&self.agent, COMPLETION_NAMES_MAX);
        let mut names = names.lock();
        names.commands = commands;
        names.lisp = lisp;
    }

    fn cwd(&self) -> PathBuf {
        self.agent
            .sessions()
            .with(&self.session, |s| s.cwd.clone())
            .unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| "/".into()))
    }

    /// A dimmed line of the chat's own.
    fn note(&mut self, text: &str) {
        let text = if self.caps.color {
            format!("\x1b[2m{text}\x1b[0m")
        } else {
            text.to_owned()
        };
        if self.caps.interactive {
            self.screen.lines(&text);
            self.screen.flush();
        } else {
            err!("{text}");
        }
    }

    fn error(&mut self, message: &str) {
        self.failed = true;
        let line = format!("error: {message}");
        if !self.caps.interactive {
            err!("{line}");
            return;
        }
        let line = if self.caps.color {
            format!("\x1b[31m{line}\x1b[0m")
        } else {
            line
        };
        self.screen.lines(&line);
        self.screen.flush();
    }

    fn lisp_error(&mut self, e: &LispError) {
        self.error(&e.to_string());
    }
}

/// `info` without its null fields: a JSON null becomes `json.null` in Lisp, which is truthy, so
/// a field that is not known must be absent (nil) for `(if info.model …)` to see that.
fn without_nulls(info: serde_json::Value) -> serde_json::Value {
    match info {
        serde_json::Value::Object(mut fields) => {
            fields.retain(|_, v| !v.is_null());
            serde_json::Value::Object(fields)
        }
        other => other,
    }
}

/// What `,help` shows (under 80 columns).
const HELP: &str = "\
Input
  text          a prompt for the agent; @path attaches a file
  /name args    a slash command (/commands lists them)
  (form)        Fennel in this live image; lines go on until it balances
  ,help ,exit   chat commands; the REPL's ,doc ,reload ,apropos ... too
Keys
  Enter         send              Alt-Enter or a trailing \\  new line
                while the agent works: queue the line for its own turn
  Ctrl-S        while the agent works: steer the line into the running turn
  Tab           complete /commands, Lisp names and @paths
  Up, Down      history           Ctrl-D  exit
  Ctrl-C        cancel the turn (twice: stop the Lisp code);
                twice on an empty line: exit
Permission questions take one key: y yes once (Enter), a always in this
session, n no; Ctrl-C or Esc cancels the turn.";
