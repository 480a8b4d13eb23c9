//! `client.ask`: a prompt to the persistent session of an agent through its `oml ask` owner
//! (the one `oml ask AGENT` reaches from a shell in the same directory), so that flows and the
//! shell share sessions. The agent's name is resolved with `client.resolve-agent` only when no
//! owner runs yet. Updates go to `:on-update` and questions to `:on-permission` in the calling
//! coroutine, as with `client.prompt`.

use std::path::PathBuf;

use mlua::{Function, Lua, Table, Value};
use serde::Deserialize as _;

use super::{lua_error, outcome};
use crate::acp_client::{Category, ClientError};
use crate::ask::asker::{self, AskError, Conversation};
use crate::ask::wire::{Config, Event, Policy, Request};
use crate::ask::{AgentCommand, DEFAULT_SESSION, DEFAULT_TTL, Key, OwnerSpec, Place, key_dir};
use crate::cancel::CancelToken;
use crate::lisp::{HostFn, Lisp, create_async_function, from_lua, to_lua};
use crate::paths::Paths;

/// `client.ask`.
pub(super) const RAW: &[HostFn] = &[HostFn {
    name: "ask",
    args: "agent prompt ?opts",
    doc: "Send PROMPT (text or content blocks) to the persistent session of the agent named \
          AGENT (client.defagent or catalog) in :cwd (default: the current directory), through \
          its `oml ask` owner, started when none runs; waits for the end of the turn and returns \
          {:stop-reason :text :session-id}. OPTS: :session (its name, default \"default\"), \
          :ttl (seconds the owner stays after its last prompt, default 300), :policy \
          (:approve-reads, the default, :approve-all or :deny-all) or :on-permission (a handler \
          as client.connect's), :on-update (called with each update), :model, :mode, :set \
          (a table of config options), :exec? (a one-shot session, not kept). Failure raises \
          an error table.",
    make: |lua| {
        create_async_function(
            lua,
            |lua, (agent, prompt, opts): (String, Value, Option<Table>)| async move {
                let r = ask(&lua, agent, prompt, opts).await;
                outcome(&lua, r)
            },
        )
    },
}];

async fn ask(
    lua: &Lua,
    agent: String,
    prompt: Value,
    opts: Option<Table>,
) -> Result<Table, ClientError> {
    let opts = match opts {
        Some(t) => t,
        None => lua.create_table().map_err(lua_error)?,
    };
    let lisp = Lisp::from_lua(lua).ok_or_else(|| lua_error(mlua::Error::runtime("no host")))?;
    let paths = Paths::from_env();
    let key = key_of(&agent, &opts)?;
    let place = Place::of(&paths, &key);
    let prompt = super::turns::prompt_blocks(lua, prompt)?;
    let handler: Option<Function> = opts.get("on-permission").map_err(lua_error)?;
    let on_update: Option<Function> = opts.get("on-update").map_err(lua_error)?;
    let policy = policy(&opts, handler.is_some())?;
    let config = config(lua, &opts)?;
    let exec = opts
        .get::<Option<bool>>("exec?")
        .map_err(lua_error)?
        .unwrap_or(false);
    let spec = |persistent| {
        resolve(
            lisp.clone(),
            agent.clone(),
            key.clone(),
            paths.clone(),
            persistent,
        )
    };
    let conversation = if exec {
        asker::exec(
            spec(false).await.map_err(ask_error)?,
            prompt,
            policy,
            config,
        )
    } else {
        let ttl = opts.get::<Option<u64>>("ttl").map_err(lua_error)?;
        let request = Request::Prompt {
            prompt,
            wait: true,
            policy,
            ttl: ttl.unwrap_or(DEFAULT_TTL.as_secs()),
            config,
        };
        asker::ask(&place, &request, spec(true))
            .await
            .map_err(ask_error)?
    };
    let handler = match handler {
        Some(f) => Some(super::permission_handler(&lisp, f).map_err(lua_error)?),
        None => None,
    };
    follow(lua, conversation, on_update, handler).await
}

/// The owner's key for `agent` with the options' `:cwd` (default: this process's folder) and
/// `:session` name.
fn key_of(agent: &str, opts: &Table) -> Result<Key, ClientError> {
    let cwd: Option<String> = opts.get("cwd").map_err(lua_error)?;
    let cwd = match cwd {
        Some(dir) => PathBuf::from(dir),
        None => std::env::current_dir().map_err(|e| connection(e.to_string()))?,
    };
    Ok(Key {
        agent: agent.to_owned(),
        cwd: key_dir(&cwd),
        name: opts
            .get::<Option<String>>("session")
            .map_err(lua_error)?
            .unwrap_or_else(|| DEFAULT_SESSION.to_owned()),
    })
}

/// Reads the prompt's events into the result, calling the callbacks on the way.
async fn follow(
    lua: &Lua,
    mut conversation: Conversation,
    on_update: Option<Function>,
    handler: Option<crate::acp_client::PermissionHandler>,
) -> Result<Table, ClientError> {
    let mut session = String::new();
    loop {
        let event = conversation.next().await.map_err(ask_error)?;
        let Some(event) = event else {
            return Err(connection(
                "the session's owner ended before the prompt did".into(),
            ));
        };
        match event {
            Event::Started { session_id, .. } => session = session_id,
            Event::Update { update, .. } => {
                if let Some(f) = &on_update {
                    let t = to_lua(lua, &update).map_err(lua_error)?;
                    if let Value::Table(t) = &t {
                        let kind = crate::acp::answers::UpdateKind::of(&update).kebab();
                        t.set("kind", kind).map_err(lua_error)?;
                    }
                    f.call_async::<()>(t).await.map_err(|e| {
                        ClientError::new(
                            Category::Protocol,
                            format!("the on-update callback failed: {e}"),
                        )
                    })?;
                }
            }
            Event::Permission {
                id,
                session_id,
                tool_call,
                options,
            } => {
                let decision =
                    asker::decide(handler.as_ref(), &session_id, &tool_call, &options).await;
                conversation.answer(id, decision).await.map_err(ask_error)?;
            }
            Event::Done { stop_reason, text } => {
                let t = lua.create_table().map_err(lua_error)?;
                t.set("stop-reason", stop_reason.kebab())
                    .map_err(lua_error)?;
                t.set("text", text).map_err(lua_error)?;
                t.set("session-id", session).map_err(lua_error)?;
                return Ok(t);
            }
            Event::Failed { category, message } => {
                let category = match category.as_str() {
                    "agent" => Category::Agent,
                    "protocol" => Category::Protocol,
                    "capability" => Category::Capability,
                    _ => Category::Connection,
                };
                return Err(ClientError::new(category, message));
            }
            Event::Queued { .. } | Event::Ack { .. } | Event::Status(_) => {}
        }
    }
}

fn policy(opts: &Table, handler: bool) -> Result<Policy, ClientError> {
    if handler {
        return Ok(Policy::Ask);
    }
    let named: Option<String> = opts.get("policy").map_err(lua_error)?;
    match named.as_deref() {
        None | Some("approve-reads") => Ok(Policy::ApproveReads),
        Some("approve-all") => Ok(Policy::ApproveAll),
        Some("deny-all") => Ok(Policy::DenyAll),
        Some(other) => Err(ClientError::new(
            Category::Protocol,
            format!("client.ask: :policy {other} is not :approve-reads, :approve-all or :deny-all"),
        )),
    }
}

fn config(lua: &Lua, opts: &Table) -> Result<Config, ClientError> {
    let mut set = Vec::new();
    if let Some(t) = opts.get::<Option<Table>>("set").map_err(lua_error)? {
        let v = from_lua(lua, Value::Table(t)).map_err(lua_error)?;
        for (k, v) in v.as_object().into_iter().flatten() {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            set.push((k.clone(), v));
        }
    }
    Ok(Config {
        model: opts.get("model").map_err(lua_error)?,
        mode: opts.get("mode").map_err(lua_error)?,
        set,
    })
}

/// What `client.resolve-agent` gives: `{:command :args [..] :env {..}}` (args that are not a
/// list, and env that is not a table, count as none).
#[derive(serde::Deserialize)]
struct Resolved {
    command: serde_json::Value,
    #[serde(default)]
    args: crate::acp::Loose<Vec<serde_json::Value>>,
    #[serde(default)]
    env: crate::acp::Loose<serde_json::Map<String, serde_json::Value>>,
}

impl Resolved {
    /// The agent's command: the command, args and env values must be strings.
    fn command(self) -> Result<AgentCommand, serde_json::Error> {
        let text = String::deserialize;
        let args = self.args.0.unwrap_or_default().into_iter().map(text);
        let env = self.env.0.unwrap_or_default().into_iter();
        Ok(AgentCommand {
            command: text(self.command)?,
            args: args.collect::<Result<_, _>>()?,
            env: env
                .map(|(k, v)| Ok((k, text(v)?)))
                .collect::<Result<_, serde_json::Error>>()?,
        })
    }
}

/// How the owner starts the agent: `client.resolve-agent`, called only when one is started.
async fn resolve(
    lisp: Lisp,
    agent: String,
    key: Key,
    paths: Paths,
    persistent: bool,
) -> Result<OwnerSpec, AskError> {
    let value = lisp
        .call_json(
            "client.resolve-agent",
            &[serde_json::Value::String(agent)],
            &CancelToken::new(),
        )
        .await
        .map_err(|e| AskError::Agent(e.to_string()))?;
    let agent = Resolved::deserialize(value)
        .and_then(Resolved::command)
        .map_err(|e| AskError::Agent(format!("client.resolve-agent: {e}")))?;
    Ok(OwnerSpec {
        key,
        agent,
        persistent,
        state_dir: paths.state,
        runtime_dir: paths.runtime,
    })
}

fn ask_error(e: AskError) -> ClientError {
    match e {
        AskError::Agent(message) => ClientError::new(Category::Connection, message),
        other => connection(other.to_string()),
    }
}

fn connection(message: String) -> ClientError {
    ClientError::new(Category::Connection, message)
}
