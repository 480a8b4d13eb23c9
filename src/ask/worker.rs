//! The agent behind an owner: its connection and its one session, (re)made on demand, and one
//! prompt run from start to stop reason as a stream of [`Event`]s to whoever asked.
//!
//! The agent is started on the first prompt and again after it died: the session the record
//! names is then loaded (`session/load`, its replay discarded) or resumed (`session/resume`),
//! and only when neither works is a new one made. A prompt that was with the agent when it died
//! fails and is not sent again: it may have done half its work.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::record::{self, Entry, Record};
use super::wire::{Config, Decision, Event, Policy};
use super::{AgentCommand, OwnerSpec};
use crate::acp::StopReason;
use crate::acp::answers::{self, UpdateKind};
use crate::acp_client::{
    BoxFuture, Category, Client, ClientError, ConnectOptions, PermissionDecision,
    PermissionHandler, PermissionRequest, Spawn, TurnEvent,
};
use crate::cancel::CancelToken;

/// Tool kinds `approve-reads` allows.
pub const READ_KINDS: [&str; 2] = ["read", "search"];

/// The asker of the running prompt, as the permission handler reaches it.
pub struct Link {
    pub events: mpsc::UnboundedSender<Event>,
    pub policy: Policy,
    /// Permission questions sent and not answered yet, by id.
    pub pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Decision>>>>,
}

impl Link {
    /// A link whose events go to `events`; the answers come back through [`Link::answer`].
    pub fn new(events: mpsc::UnboundedSender<Event>, policy: Policy) -> Link {
        Link {
            events,
            policy,
            pending: Arc::default(),
        }
    }

    /// Hands the asker's answer to the question `id` (an unknown id is ignored).
    pub fn answer(pending: &Mutex<HashMap<u64, oneshot::Sender<Decision>>>, id: u64, d: Decision) {
        if let Some(tx) = pending.lock().remove(&id) {
            let _ = tx.send(d);
        }
    }
}

/// A question for the asker, handed to the running turn so that it goes out after the updates
/// that came before it.
struct Question {
    request: PermissionRequest,
    reply: oneshot::Sender<Decision>,
}

/// The running prompt, as the permission handler sees it.
struct Current {
    policy: Policy,
    questions: mpsc::UnboundedSender<Question>,
}

/// Decides the agent's permission requests for whichever prompt is running.
#[derive(Default)]
struct Asks {
    current: Mutex<Option<Current>>,
}

impl Asks {
    async fn decide(&self, req: PermissionRequest) -> PermissionDecision {
        let kind = crate::acp::answers::tool_kind(&req.tool_call);
        let (policy, questions) = match &*self.current.lock() {
            Some(c) => (c.policy, c.questions.clone()),
            None => return PermissionDecision::Reject,
        };
        match policy {
            Policy::ApproveAll => PermissionDecision::Allow,
            Policy::DenyAll => PermissionDecision::Reject,
            Policy::ApproveReads if kind.is_some_and(|k| READ_KINDS.contains(&k)) => {
                PermissionDecision::Allow
            }
            Policy::ApproveReads => PermissionDecision::Reject,
            Policy::Ask => {
                let cancel = req.cancel.clone();
                let (reply, answer) = oneshot::channel();
                if questions
                    .send(Question {
                        request: req,
                        reply,
                    })
                    .is_err()
                {
                    return PermissionDecision::Reject;
                }
                tokio::select! {
                    answer = answer => answer.map_or(PermissionDecision::Reject, Into::into),
                    () = cancel.cancelled() => PermissionDecision::Cancel,
                }
            }
        }
    }
}

/// The running agent and its session.
struct Connected {
    client: Client,
    session_id: String,
}

/// What `status` shows of a worker, kept current by the worker as it changes.
#[derive(Clone, Debug, Default)]
pub struct Shown {
    pub agent_pid: Option<i32>,
    pub session_id: Option<String>,
    /// The first line of the prompt running now, or else of the last one.
    pub last_prompt: Option<String>,
}

/// An owner's agent, session and record.
pub struct Worker {
    spec: OwnerSpec,
    agent: Option<Connected>,
    record: Record,
    asks: Arc<Asks>,
    /// Read by `status` while the worker is busy.
    pub shown: Arc<Mutex<Shown>>,
}

impl Worker {
    pub fn new(spec: OwnerSpec) -> Worker {
        let record = if spec.persistent {
            Record::read(&spec.place().record)
        } else {
            Record::default()
        };
        let shown = Shown {
            session_id: record.session_id.clone(),
            ..Shown::default()
        };
        Worker {
            spec,
            agent: None,
            record,
            asks: Arc::default(),
            shown: Arc::new(Mutex::new(shown)),
        }
    }

    /// Brings [`Worker::shown`] up to date.
    fn show(&self) {
        let mut shown = self.shown.lock();
        shown.agent_pid = self.agent_pid();
        shown.session_id = self.session_id();
    }

    /// The agent's pid while it runs.
    pub fn agent_pid(&self) -> Option<i32> {
        self.agent
            .as_ref()
            .and_then(|c| c.client.process().map(|p| p.pid()))
    }

    /// The session id, once there is one (the record's before the agent started).
    pub fn session_id(&self) -> Option<String> {
        match &self.agent {
            Some(c) => Some(c.session_id.clone()),
            None => self.record.session_id.clone(),
        }
    }

    /// Runs one prompt, sending its events to `link`; `stop` cancels it (the asker left, or
    /// `oml ask cancel`).
    pub async fn prompt(&mut self, prompt: Value, config: &Config, link: Link, stop: CancelToken) {
        let events = link.events.clone();
        let first_line = prompt_line(&prompt);
        self.shown.lock().last_prompt = Some(first_line.clone());
        let started = record::now();
        let outcome = match self.ready(config, &stop).await {
            Ok(()) => self.turn(prompt, link, &stop).await,
            // Cancelled before the prompt reached the agent: it ends as a cancelled turn.
            Err(_) if stop.is_cancelled() => Ok((StopReason::Cancelled, String::new())),
            Err(e) => Err(e),
        };
        let session_id = self.session_id().unwrap_or_default();
        let (stop_reason, text, last) = match outcome {
            Ok((reason, text)) => {
                let done = Event::Done {
                    stop_reason: reason.clone(),
                    text: text.clone(),
                };
                (reason.wire().to_owned(), text, done)
            }
            Err(e) => {
                if e.category == Category::Connection {
                    self.drop_agent().await;
                }
                let event = failed(&e);
                ("failed".to_owned(), e.message, event)
            }
        };
        // The record first, then the last event: an asker that reads the history as soon as
        // its prompt is answered finds the prompt in it.
        if self.spec.persistent {
            self.record.push(Entry {
                at: started,
                session_id,
                prompt: record::clip(&first_line),
                stop_reason,
                text: record::clip(&text),
            });
            self.save();
        }
        let _ = events.send(last);
    }

    /// The agent running with its session, and `config` applied; given up at once when `stop`
    /// is cancelled (an agent still starting is then closed in the background).
    async fn ready(&mut self, config: &Config, stop: &CancelToken) -> Result<(), ClientError> {
        if let Some(c) = &self.agent
            && (c
                .client
                .process()
                .is_some_and(|p| p.exit_status().is_some())
                || c.client.is_closed().await)
        {
            self.drop_agent().await;
        }
        if self.agent.is_none() {
            let connected = self.connect(Some(stop)).await?;
            self.agent = Some(connected);
            self.show();
        }
        let Some(c) = &self.agent else {
            return Err(ClientError::new(Category::Connection, "no agent"));
        };
        tokio::select! {
            applied = apply(&c.client, &c.session_id, config) => applied,
            () = stop.cancelled() => Err(cancelled()),
        }
    }

    /// Starts the agent and opens the session (the kept one, else a new one); `stop` gives up.
    async fn connect(&mut self, stop: Option<&CancelToken>) -> Result<Connected, ClientError> {
        let AgentCommand { command, args, env } = self.spec.agent.clone();
        let asks = Arc::clone(&self.asks);
        let handler: PermissionHandler = Arc::new(move |req| {
            let asks = Arc::clone(&asks);
            let decided: BoxFuture<Result<PermissionDecision, String>> =
                Box::pin(async move { Ok(asks.decide(req).await) });
            decided
        });
        let client = Client::connect(ConnectOptions {
            spawn: Spawn {
                command,
                args,
                env,
                cwd: Some(self.spec.key.cwd.clone()),
            },
            on_permission: Some(handler),
            auto_authenticate: true,
            cancel: stop.cloned(),
            ..ConnectOptions::default()
        })
        .await?;
        let never = CancelToken::new();
        let stop = stop.unwrap_or(&never);
        let opened = tokio::select! {
            opened = self.open_session(&client) => opened,
            () = stop.cancelled() => Err(cancelled()),
        };
        let session_id = match opened {
            Ok(id) => id,
            Err(e) if stop.is_cancelled() => {
                // The asker is not kept waiting for the agent's end.
                tokio::spawn(async move { client.close().await });
                return Err(e);
            }
            Err(e) => {
                client.close().await;
                return Err(e);
            }
        };
        self.record.key = Some(self.spec.key.clone());
        self.record.session_id = Some(session_id.clone());
        self.record.updated = record::now();
        self.save();
        Ok(Connected { client, session_id })
    }

    /// The kept session loaded or resumed, else a new one: its id.
    async fn open_session(&self, client: &Client) -> Result<String, ClientError> {
        let cwd = self.spec.key.cwd.clone();
        let kept = self
            .record
            .session_id
            .clone()
            .filter(|_| self.spec.persistent);
        let reopened = match kept {
            Some(id) if client.can_load_session() => {
                client.load_session(&id, &cwd).await.map(|_| id)
            }
            Some(id) => client.resume_session(&id, &cwd).await.map(|_| id),
            None => Err(ClientError::new(Category::Capability, "no session kept")),
        };
        match reopened {
            Ok(id) => Ok(id),
            Err(e) => {
                if self.record.session_id.is_some() {
                    tracing::warn!("the kept session cannot be reopened ({e}); starting a new one");
                }
                new_session(client, &cwd).await
            }
        }
    }

    /// Sends the prompt and hands its events over until the stop reason.
    async fn turn(
        &mut self,
        prompt: Value,
        link: Link,
        stop: &CancelToken,
    ) -> Result<(StopReason, String), ClientError> {
        let Some(c) = &self.agent else {
            return Err(ClientError::new(Category::Connection, "no agent"));
        };
        let (client, session_id) = (c.client.clone(), c.session_id.clone());
        let (questions, asked) = mpsc::unbounded_channel();
        *self.asks.current.lock() = Some(Current {
            policy: link.policy,
            questions,
        });
        let result = run_turn(&client, &session_id, prompt, &link, asked, stop).await;
        *self.asks.current.lock() = None;
        result
    }

    /// A new session replaces the kept one (the agent is started if needed).
    pub async fn new_session(&mut self) -> Result<String, ClientError> {
        self.record.session_id = None;
        self.save();
        match &mut self.agent {
            Some(c) => {
                let id = new_session(&c.client, &self.spec.key.cwd).await?;
                c.session_id = id.clone();
                self.record.session_id = Some(id.clone());
                self.save();
                Ok(id)
            }
            None => {
                let c = self.connect(None).await?;
                let id = c.session_id.clone();
                self.agent = Some(c);
                Ok(id)
            }
        }
    }

    /// Closes the session where the agent can, forgets it, and stops the agent.
    pub async fn close_session(&mut self) {
        if let Some(c) = &self.agent
            && c.client.has_session_capability("close")
        {
            let _ = c.client.close_session(&c.session_id).await;
        }
        self.drop_agent().await;
        if self.spec.persistent {
            let _ = std::fs::remove_file(self.spec.place().record);
        }
    }

    /// Stops the agent (the record stays).
    pub async fn drop_agent(&mut self) {
        if let Some(c) = self.agent.take() {
            c.client.close().await;
        }
        self.show();
    }

    fn save(&self) {
        self.show();
        if !self.spec.persistent {
            return;
        }
        if let Err(e) = self.record.write(&self.spec.place().record) {
            tracing::warn!("cannot write the session's record: {e}");
        }
    }
}

/// The turn's updates and questions to `link` until its stop reason; `stop` sends
/// `session/cancel` once.
async fn run_turn(
    client: &Client,
    session_id: &str,
    prompt: Value,
    link: &Link,
    mut asked: mpsc::UnboundedReceiver<Question>,
    stop: &CancelToken,
) -> Result<(StopReason, String), ClientError> {
    let events = &link.events;
    let mut next_id = 0u64;
    let mut turn = client.prompt(session_id, prompt, None)?;
    let _ = events.send(Event::Started {
        session_id: session_id.to_owned(),
        turn: turn.number(),
    });
    let mut text = String::new();
    let mut cancel_sent = false;
    loop {
        let next = tokio::select! {
            next = turn.next() => next,
            Some(q) = asked.recv() => {
                // The updates before the question go out first.
                forward(turn.arrived(), session_id, events, &mut text);
                next_id += 1;
                link.pending.lock().insert(next_id, q.reply);
                let _ = events.send(Event::Permission {
                    id: next_id,
                    session_id: q.request.session_id,
                    tool_call: q.request.tool_call,
                    options: q.request.options,
                });
                continue;
            }
            () = stop.cancelled(), if !cancel_sent => {
                cancel_sent = true;
                client.cancel(session_id).await?;
                continue;
            }
        };
        match next {
            TurnEvent::Updates(updates) => forward(updates, session_id, events, &mut text),
            TurnEvent::Done(result) => return result.map(|stop| (stop.1, text)),
        }
    }
}

/// Hands updates to the asker, keeping the text of the agent's message since its last tool
/// call.
fn forward(
    updates: Vec<crate::acp_client::Update>,
    session_id: &str,
    events: &mpsc::UnboundedSender<Event>,
    text: &mut String,
) {
    for u in updates {
        match u.kind {
            UpdateKind::AgentMessageChunk => {
                text.push_str(answers::chunk_text(&u.value).unwrap_or_default());
            }
            UpdateKind::ToolCall | UpdateKind::ToolCallUpdate => text.clear(),
            _ => {}
        }
        let _ = events.send(Event::Update {
            session_id: session_id.to_owned(),
            update: u.value,
        });
    }
}

async fn new_session(client: &Client, cwd: &std::path::Path) -> Result<String, ClientError> {
    let (answer, _) = client.new_session(cwd).await?;
    Ok(answers::session_id(&answer).unwrap_or_default().to_owned())
}

/// `--model`, `--mode`, `--set`: the model through the config option of category `model` when
/// the agent has one, else the legacy `session/set_model`; the mode through `session/set_mode`.
async fn apply(client: &Client, session_id: &str, config: &Config) -> Result<(), ClientError> {
    if let Some(mode) = &config.mode {
        client.set_mode(session_id, mode).await?;
    }
    if let Some(model) = &config.model {
        match client
            .set_config_option(session_id, "model", Value::String(model.clone()))
            .await
        {
            Ok(_) => {}
            Err(_) => {
                client.set_model(session_id, model).await?;
            }
        }
    }
    for (key, value) in &config.set {
        let value = match value.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            v => Value::String(v.to_owned()),
        };
        client.set_config_option(session_id, key, value).await?;
    }
    Ok(())
}

/// The prompt was cancelled before it reached the agent.
fn cancelled() -> ClientError {
    ClientError::new(Category::Connection, "cancelled before the prompt was sent")
}

/// A failure as the asker sees it.
pub fn failed(e: &ClientError) -> Event {
    Event::Failed {
        category: e.category.as_str().to_owned(),
        message: e.message.clone(),
    }
}

/// The first line of a prompt's first text block.
pub fn prompt_line(prompt: &Value) -> String {
    let text = prompt
        .as_array()
        .and_then(|blocks| blocks.iter().find_map(|b| b.get("text")?.as_str()))
        .unwrap_or("");
    text.lines().next().unwrap_or("").to_owned()
}
