//! Sessions and turns of a connection as Lisp sees them: the session tables, the updates, the
//! prompt with its callbacks, and late updates.
//!
//! This module does not start connections or answer permission requests.

use std::path::PathBuf;

use mlua::{Function, Lua, LuaSerdeExt as _, MultiValue, Table, Value};

use super::connect::seconds;
use super::{Conn, ConnState, LastTurn, lua_error, outcome};
use crate::acp::answers::{self, UpdateKind};
use crate::acp_client::{Category, Client, ClientError, OutOfTurn, TurnEvent, Update};
use crate::cancel::CancelToken;
use crate::lisp::{Lisp, from_lua, to_lua};

/// A late update (or one before any turn): appended to its turn's `updates` when that turn is
/// the session's last, and given to that turn's callback, else to the connection's.
pub(super) async fn deliver_out_of_turn(
    lisp: &Lisp,
    state: &ConnState,
    event: OutOfTurn,
) -> Result<(), crate::lisp::LispError> {
    let lua = lisp.lua();
    let t = update_table(lua, &event.session_id, &event.update)?;
    let mut callback: Option<Function> = None;
    // A late update of a prompt that has not returned yet waits until it has.
    let running = {
        let turns = state.last_turns.lock();
        turns
            .get(&event.session_id)
            .and_then(|kept| kept.iter().find(|l| Some(l.number) == event.update.turn))
            .map(|last| last.returned.clone())
    };
    if let Some(mut returned) = running {
        // Ends with an error when the prompt's sender is dropped, that is when it returns.
        while returned.changed().await.is_ok() {}
    }
    {
        let turns = state.last_turns.lock();
        if let Some(last) = turns
            .get(&event.session_id)
            .and_then(|kept| kept.iter().find(|l| Some(l.number) == event.update.turn))
        {
            if let Some(key) = &last.updates {
                let updates: Table = lua.registry_value(key)?;
                updates.raw_push(t.clone())?;
            }
            if let Some(key) = &last.callback {
                callback = Some(lua.registry_value(key)?);
            }
        }
    }
    if callback.is_none()
        && let Some(key) = &state.on_update
    {
        callback = Some(lua.registry_value(key)?);
    }
    if let Some(f) = callback {
        lisp.run::<()>(f, t, &CancelToken::new()).await?;
    }
    Ok(())
}

/// What `client.capabilities` shows: each capability a flag, and the answer's parts as sent.
#[derive(serde::Serialize)]
#[serde(rename_all = "kebab-case")]
struct Capabilities<'a> {
    protocol_version: &'a serde_json::Value,
    load_session: bool,
    list_sessions: bool,
    close_session: bool,
    resume_session: bool,
    delete_session: bool,
    fork_session: bool,
    additional_directories: bool,
    system_prompt: bool,
    image_content: bool,
    audio_content: bool,
    embedded_context: bool,
    mcp_http: bool,
    mcp_sse: bool,
    logout: bool,
    agent_capabilities: &'a serde_json::Value,
    auth_methods: &'a serde_json::Value,
    agent_info: &'a serde_json::Value,
}

pub(super) fn capabilities(lua: &Lua, client: &Client) -> Result<Table, ClientError> {
    let init = client.initialized();
    let c = &init.capabilities;
    let (session, prompt, mcp) = (
        &c.session_capabilities,
        &c.prompt_capabilities,
        &c.mcp_capabilities,
    );
    let data = Capabilities {
        protocol_version: &init.protocol_version,
        load_session: c.load_session.0,
        list_sessions: session.list.0,
        close_session: session.close.0,
        resume_session: session.resume.0,
        delete_session: session.delete.0,
        fork_session: session.fork.0,
        additional_directories: session.additional_directories.0,
        system_prompt: session.system_prompt.0,
        image_content: prompt.image.0,
        audio_content: prompt.audio.0,
        embedded_context: prompt.embedded_context.0,
        mcp_http: mcp.http.0,
        mcp_sse: mcp.sse.0,
        logout: c.auth.logout.0,
        agent_capabilities: &init.capabilities_as_sent,
        auth_methods: &init.auth_methods,
        agent_info: &init.agent_info,
    };
    let data = serde_json::to_value(&data).unwrap_or_default();
    let Value::Table(t) = to_lua(lua, &data).map_err(lua_error)? else {
        unreachable!("an object converts to a table")
    };
    if let Some(method) = client.authenticated_method() {
        t.set("authenticated", method).map_err(lua_error)?;
    }
    Ok(t)
}

pub(super) fn session_cwd(cwd: Option<String>) -> Result<PathBuf, ClientError> {
    match cwd {
        Some(c) => Ok(PathBuf::from(c)),
        None => std::env::current_dir().map_err(|e| {
            ClientError::new(Category::Connection, format!("no current directory: {e}"))
        }),
    }
}

/// `{:session-id :modes :config-options :models :updates :response}`; the updates that came
/// before the answer also go to the connection's callback, in order, from this coroutine.
/// What `new-session`, `load-session`, `resume-session` and `fork-session` return: the session table for the
/// agent's answer and the updates held before it, or the error value. `sid` is written into the
/// answer when given (load and resume answers do not carry the id).
pub(super) async fn opened_session(
    lua: &Lua,
    conn: &Conn,
    opened: Result<(serde_json::Value, Vec<Update>), ClientError>,
    sid: Option<&str>,
) -> mlua::Result<MultiValue> {
    match opened {
        Ok((mut answer, held)) => {
            if let (Some(sid), Some(answer)) = (sid, answer.as_object_mut()) {
                answer.insert("sessionId".into(), sid.into());
            }
            outcome(lua, session_table(lua, conn, answer, held).await)
        }
        Err(e) => outcome::<Value>(lua, Err(e)),
    }
}

async fn session_table(
    lua: &Lua,
    conn: &Conn,
    answer: serde_json::Value,
    held: Vec<Update>,
) -> Result<Table, ClientError> {
    let r = async {
        let t = lua.create_table()?;
        let sid = answers::session_id(&answer).unwrap_or_default().to_owned();
        t.set("session-id", sid.as_str())?;
        let setup = answers::SessionSetup::read(&answer);
        for (key, v) in [
            ("modes", setup.modes),
            ("config-options", setup.config_options),
            ("models", setup.models),
        ] {
            if let Some(v) = v {
                t.set(key, to_lua(lua, &v)?)?;
            }
        }
        t.set("response", to_lua(lua, &answer)?)?;
        let updates = lua.create_table()?;
        updates.set_metatable(Some(lua.array_metatable()))?;
        let callback: Option<Function> = match &conn.state.on_update {
            Some(key) => Some(lua.registry_value(key)?),
            None => None,
        };
        for u in &held {
            let ut = update_table(lua, &sid, u)?;
            updates.raw_push(ut.clone())?;
            if let Some(f) = &callback {
                f.call_async::<()>(ut).await?;
            }
        }
        t.set("updates", updates)?;
        Ok::<_, mlua::Error>(t)
    }
    .await;
    r.map_err(lua_error)
}

/// One update as Lisp sees it: the wire object plus `kind`, `seq`, `session-id`, `turn` and,
/// for late ones, `late`.
fn update_table(lua: &Lua, session_id: &str, u: &Update) -> mlua::Result<Table> {
    let t = match to_lua(lua, &u.value)? {
        Value::Table(t) if !u.value.is_array() => t,
        other => {
            let t = lua.create_table()?;
            t.set("value", other)?;
            t
        }
    };
    t.set("kind", u.kind.kebab())?;
    t.set("seq", u.seq)?;
    t.set("session-id", session_id)?;
    if let Some(turn) = u.turn {
        t.set("turn", turn)?;
    }
    if u.late {
        t.set("late", true)?;
    }
    Ok(t)
}

pub(super) fn prompt_blocks(lua: &Lua, content: Value) -> Result<serde_json::Value, ClientError> {
    match content {
        Value::String(s) => Ok(crate::acp::requests::text_prompt(s.to_string_lossy())),
        Value::Table(_) => {
            let v = from_lua(lua, content).map_err(lua_error)?;
            Ok(match v {
                serde_json::Value::Object(_) => serde_json::Value::Array(vec![v]),
                serde_json::Value::Array(_) => v,
                _ => serde_json::Value::Array(Vec::new()),
            })
        }
        other => Err(ClientError::new(
            Category::Protocol,
            format!(
                "a prompt is text or content blocks, not {}",
                other.type_name()
            ),
        )),
    }
}

/// Send the prompt and register its turn for late updates: its own callback `own`, its
/// `updates` list unless the prompt keeps none. The lock is held across the send, so that no
/// late update of this turn can miss them; the returned sender is dropped when the prompt
/// returns, which lets its late updates through.
fn start_turn(
    lua: &Lua,
    conn: &Conn,
    sid: &str,
    blocks: serde_json::Value,
    timeout: Option<std::time::Duration>,
    own: Option<&Function>,
    updates: Option<&Table>,
) -> Result<(crate::acp_client::Turn, tokio::sync::watch::Sender<()>), ClientError> {
    let (returned, returned_rx) = tokio::sync::watch::channel(());
    let mut turns = conn.state.last_turns.lock();
    let turn = conn.client.prompt(sid, blocks, timeout)?;
    let key = |v: mlua::Value| lua.create_registry_value(v).map_err(lua_error);
    let last = LastTurn {
        number: turn.number(),
        callback: own.map(|f| key(Value::Function(f.clone()))).transpose()?,
        updates: updates.map(|t| key(Value::Table(t.clone()))).transpose()?,
        returned: returned_rx,
    };
    let kept = turns.entry(sid.to_owned()).or_default();
    if kept.len() >= super::TURNS_KEPT {
        kept.pop_front();
    }
    kept.push_back(last);
    Ok((turn, returned))
}

/// The options of `client.prompt`.
struct PromptOptions {
    /// The prompt's own `:on-update`.
    callback: Option<Function>,
    timeout: Option<std::time::Duration>,
    /// `:keep-updates?`: whether the turn's updates are kept in its `updates` list.
    keep: bool,
    /// `:cancel-with-prompt?`: cancel the turn when the oml prompt this coroutine runs for is.
    follow: bool,
}

fn flag(opts: &Table, key: &str, default: bool) -> Result<bool, ClientError> {
    match opts.get::<Value>(key).map_err(lua_error)? {
        Value::Nil => Ok(default),
        Value::Boolean(b) => Ok(b),
        other => Err(ClientError::new(
            Category::Protocol,
            format!(
                "bad argument: :{key} must be a boolean, got {}",
                other.type_name()
            ),
        )),
    }
}

fn prompt_options(opts: Option<&Table>) -> Result<PromptOptions, ClientError> {
    let Some(opts) = opts else {
        return Ok(PromptOptions {
            callback: None,
            timeout: None,
            keep: true,
            follow: false,
        });
    };
    Ok(PromptOptions {
        callback: opts.get("on-update").map_err(lua_error)?,
        timeout: seconds(opts, "timeout")?,
        keep: flag(opts, "keep-updates?", true)?,
        follow: flag(opts, "cancel-with-prompt?", false)?,
    })
}

/// How long a turn cancelled because its oml prompt was waits for the agent to answer
/// `cancelled` before it stops waiting (and reports `cancelled` itself); the agent's later
/// updates are late ones.
pub const CANCEL_ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What `watch_turn` does with each update, and whether it follows the oml prompt's cancel.
struct Watched<'a> {
    updates: Option<&'a Table>,
    callback: Option<&'a Function>,
    follow: bool,
}

/// Hands the turn's updates to the list and the callback, in order, until its stop reason; with
/// `follow`, cancels it when the oml prompt this coroutine runs for is cancelled, and stops
/// waiting [`CANCEL_ANSWER_WAIT`] later. Returns the stop reason (or the turn's error) and the
/// final text; a failing callback is an error at once.
async fn watch_turn(
    lua: &Lua,
    conn: &Conn,
    sid: &str,
    turn: &mut crate::acp_client::Turn,
    watched: Watched<'_>,
) -> Result<(Result<crate::acp_client::Stop, ClientError>, FinalText), ClientError> {
    let parent = if watched.follow {
        crate::bind::session::session_cancel(lua)
    } else {
        CancelToken::new()
    };
    let mut text = FinalText::default();
    let mut gave_up = None;
    let stop = loop {
        let event = tokio::select! {
            event = turn.next() => event,
            () = parent.cancelled(), if watched.follow && gave_up.is_none() => {
                conn.client.cancel(sid).await?;
                gave_up = Some(tokio::time::Instant::now() + CANCEL_ANSWER_WAIT);
                continue;
            }
            () = tokio::time::sleep_until(gave_up.unwrap_or_else(tokio::time::Instant::now)), if gave_up.is_some() => {
                break Ok(crate::acp_client::Stop::new(crate::acp::StopReason::Cancelled));
            }
        };
        let batch = match event {
            TurnEvent::Updates(batch) => batch,
            TurnEvent::Done(result) => break result,
        };
        for u in &batch {
            text.update(u);
            let t = update_table(lua, sid, u).map_err(lua_error)?;
            if let Some(updates) = watched.updates {
                updates.raw_push(t.clone()).map_err(lua_error)?;
            }
            if let Some(f) = watched.callback {
                f.call_async::<()>(t).await.map_err(|e| {
                    ClientError::new(
                        Category::Protocol,
                        format!("the on-update callback failed: {e}"),
                    )
                })?;
            }
        }
    };
    Ok((stop, text))
}

/// The text of the agent's last message in a turn: its message chunks since its last tool call.
#[derive(Default)]
struct FinalText(String);

impl FinalText {
    fn update(&mut self, u: &Update) {
        match u.kind {
            UpdateKind::ToolCall => self.0.clear(),
            UpdateKind::AgentMessageChunk => {
                if let Some(text) = answers::chunk_text(&u.value) {
                    self.0.push_str(text);
                }
            }
            _ => {}
        }
    }
}

pub(super) async fn prompt(
    lua: &Lua,
    conn: &Conn,
    sid: String,
    content: Value,
    opts: Option<Table>,
) -> Result<Table, ClientError> {
    let blocks = prompt_blocks(lua, content)?;
    let PromptOptions {
        mut callback,
        timeout,
        keep,
        follow,
    } = prompt_options(opts.as_ref())?;
    let own_callback = callback.is_some();
    if callback.is_none()
        && let Some(key) = &conn.state.on_update
    {
        callback = Some(lua.registry_value(key).map_err(lua_error)?);
    }
    let updates = lua.create_table().map_err(lua_error)?;
    updates
        .set_metatable(Some(lua.array_metatable()))
        .map_err(lua_error)?;
    let own = callback.as_ref().filter(|_| own_callback);
    let kept = keep.then_some(&updates);
    // Registered before the send, so that late updates of this turn find its list and its
    // callback; `_returned` is dropped when the prompt returns, which lets them through.
    let (mut turn, _returned) = start_turn(lua, conn, &sid, blocks, timeout, own, kept)?;
    let watched = Watched {
        updates: kept,
        callback: callback.as_ref(),
        follow,
    };
    let (stop, text) = watch_turn(lua, conn, &sid, &mut turn, watched).await?;
    let stop = stop?;
    let t = lua.create_table().map_err(lua_error)?;
    t.set("stop-reason", stop.0).map_err(lua_error)?;
    t.set("text", text.0).map_err(lua_error)?;
    t.set("updates", updates).map_err(lua_error)?;
    t.set("session-id", sid).map_err(lua_error)?;
    t.set("turn", turn.number()).map_err(lua_error)?;
    Ok(t)
}
