//! The `client` namespace: oml as an ACP client, from Lisp (see docs/src/acp-client.md).
//!
//! The Rust core (`crate::acp_client`) does the work; this module converts data, runs Lisp
//! callbacks, and turns failures into error tables `{:category :message :code :data}` with a
//! `__tostring`. Host functions return `(true, ...)` or `(false, err)` and a small Fennel wrapper
//! (`client.fnl`) raises the error table, because a Rust callback cannot raise an arbitrary Lua
//! value. `turns` holds sessions and prompts, `permission` the permission handlers, `ask`
//! `client.ask` (a prompt through an `oml ask` session owner).
//!
//! Prompts are async host functions: they suspend only the calling coroutine, so several
//! sessions or connections run at once, and `client.cancel` works from another coroutine.
//! Callbacks of a turn run in the prompt's own coroutine, in order, before the prompt returns;
//! late updates run in a coroutine of their own.

mod ask;
mod connect;
mod fs;
mod permission;
mod remote;
mod terminal;
mod turns;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use mlua::{
    Function, Lua, MultiValue, RegistryKey, Table, UserData, UserDataMethods, UserDataRef, Value,
};
use parking_lot::Mutex;
use tokio::sync::Notify;

use serde::Deserialize as _;

use crate::acp::Loose;
use crate::acp_client::{Category, Client, ClientError};
use crate::cancel::CancelToken;
use crate::lisp::surface::fill;
use crate::lisp::{HostFn, Lisp, create_async_function, from_lua, to_lua};

pub use permission::{ask_on_terminal, permission_handler, terminal_permission_handler};

/// A connection as Lisp holds it.
#[derive(Clone)]
pub struct Conn {
    client: Client,
    state: Arc<ConnState>,
}

struct ConnState {
    on_update: Option<RegistryKey>,
    /// Per session: the last [`TURNS_KEPT`] turns' numbers, callbacks and `updates` tables,
    /// newest last, so a late update reaches its turn's callback and is appended to its list.
    last_turns: Mutex<HashMap<String, std::collections::VecDeque<LastTurn>>>,
}

/// How many turns per session late updates can still find: the running one and the one before
/// (whose late updates may come while the next runs). Older late updates go to the connection's
/// callback.
const TURNS_KEPT: usize = 2;

struct LastTurn {
    number: u64,
    callback: Option<RegistryKey>,
    /// The turn's `updates` list, unless the prompt asked not to keep updates.
    updates: Option<RegistryKey>,
    /// Closed when `client.prompt` returns: a late update waits for it, so the list the prompt
    /// returns holds exactly the turn's own updates, and late ones follow.
    returned: tokio::sync::watch::Receiver<()>,
}

impl UserData for Conn {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method("__tostring", |_, this, ()| Ok(this.client.describe()));
        methods.add_method("pid", |_, this, ()| {
            Ok(this.client.process().map(|p| p.pid()))
        });
    }
}

/// The result slot of a `client.spawn`ed coroutine.
#[derive(Clone, Default)]
struct Spawned {
    slot: Arc<(Mutex<Option<Value>>, Notify)>,
}

impl UserData for Spawned {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method("__tostring", |_, _, ()| Ok("#<coroutine-handle>"));
        methods.add_method("done?", |_, this, ()| Ok(this.slot.0.lock().is_some()));
    }
}

/// `client.fnl`, run with the `client` table, the raw functions below, `spawn` and `wait`:
/// defines the raising wrappers, named agents, `client.spawn` and `client.join`, and returns the
/// metatable of error tables.
static GLUE_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_client.luac"));
const GLUE_FILE: &str = "src/bind/client.fnl";

/// Where the metatable of the error tables is kept in the Lua registry.
const ERROR_MT: &str = "oml.client.error-mt";

/// The functions of the `client` namespace, as host functions that return `(true, ...)` or
/// `(false, error-table)`; `client.fnl` wraps each into one that raises the error table, with
/// the same documentation.
const RAW: &[HostFn] = &[
    HostFn {
        name: "connect",
        args: "command ?args ?opts",
        doc: "Start the ACP agent COMMAND with the arguments ?ARGS (a sequence of strings) and \
              negotiate; COMMAND may be the URL of a remote agent (http(s)://…/acp or ws://…, \
              with :token, :token-file or $OML_ACP_TOKEN). ?OPTS: :env, :cwd (the agent's), \
              :on-permission (the permission handler), :on-update (the connection's update \
              callback), :request-timeout, :startup-timeout (seconds), :authenticate? (default \
              true: authenticate by itself with an environment-variable method of the agent \
              whose variables are set). Returns a connection; \
              (tostring conn) names the agent and its pid, (conn:pid) gives the pid. Failure \
              raises an error table {:category :message :code :data}.",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (command, args, opts): (String, Option<Table>, Option<Table>)| async move {
                    let Some(lisp) = Lisp::from_lua(&lua) else {
                        return Err(mlua::Error::RuntimeError("the Lisp host is gone".into()));
                    };
                    outcome(&lua, connect::connect(&lisp, command, args, opts).await)
                },
            )
        },
    },
    HostFn {
        name: "authenticate",
        args: "conn method-id",
        doc: "Send authenticate with METHOD-ID, one of the agent's :auth-methods \
              (client.capabilities), before session/new. Returns nil; a refusal raises an error \
              table.",
        make: |lua| {
            create_async_function(lua, |lua, (conn, method): (UserDataRef<Conn>, String)| {
                let conn = conn.clone();
                async move {
                    let r = conn.client.authenticate(&method).await;
                    outcome(&lua, r.map(|()| Value::Nil))
                }
            })
        },
    },
    HostFn {
        name: "capabilities",
        args: "conn",
        doc: "What the agent of CONN negotiated: :protocol-version, the flags :load-session \
              :list-sessions :close-session :resume-session :delete-session :fork-session \
              :additional-directories :system-prompt :image-content :audio-content \
              :embedded-context :mcp-http :mcp-sse :logout, :authenticated (the method \
              client.connect authenticated with by itself, or nil), and as on the wire \
              :agent-capabilities, :auth-methods and :agent-info.",
        make: |lua| {
            lua.create_function(|lua, conn: UserDataRef<Conn>| {
                outcome(lua, turns::capabilities(lua, &conn.client))
            })
        },
    },
    HostFn {
        name: "new-session",
        args: "conn ?cwd ?opts",
        doc: "session/new in the absolute directory ?CWD (default: the current directory). \
              ?OPTS: {:mcp-servers [...]} gives the agent MCP servers, as ACP McpServer tables \
              ({:name :command :args [] :env [{:name :value}]}, or {:type \"http\" :name :url \
              :headers []}); {:additional-directories [\"/abs/dir\" ...]} more workspace roots \
              (only to an agent that advertises them, else a :capability error). Returns \
              {:session-id :modes :config-options :models :updates \
              :response}; :updates holds the updates sent before the answer. Failure raises an \
              error table.",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (conn, cwd, opts): (UserDataRef<Conn>, Option<String>, Option<mlua::Value>)| {
                    let conn = conn.clone();
                    let opts = match opts {
                        Some(opts) => crate::lisp::from_lua(&lua, opts),
                        None => Ok(serde_json::Value::Null),
                    };
                    async move {
                        let opts = NewSessionOpts::read(opts?);
                        let (servers, more) = (opts.servers(), opts.more());
                        let opened = match turns::session_cwd(cwd) {
                            Ok(cwd) => conn.client.new_session_with(&cwd, servers, &more).await,
                            Err(e) => Err(e),
                        };
                        turns::opened_session(&lua, &conn, opened, None).await
                    }
                },
            )
        },
    },
    HostFn {
        name: "load-session",
        args: "conn session-id ?cwd",
        doc: "session/load of SESSION-ID in ?CWD, when the agent advertises it (else a \
              :capability error). Returns the session table as client.new-session does, with \
              the replayed history in :updates.",
        make: |lua| {
            create_async_function(lua, |lua, (conn, sid, cwd): SessionArgs| {
                let conn = conn.clone();
                async move {
                    let opened = match turns::session_cwd(cwd) {
                        Ok(cwd) => conn.client.load_session(&sid, &cwd).await,
                        Err(e) => Err(e),
                    };
                    turns::opened_session(&lua, &conn, opened, Some(&sid)).await
                }
            })
        },
    },
    HostFn {
        name: "resume-session",
        args: "conn session-id ?cwd",
        doc: "session/resume of SESSION-ID in ?CWD, when the agent advertises it (else a \
              :capability error). Returns the session table as client.new-session does.",
        make: |lua| {
            create_async_function(lua, |lua, (conn, sid, cwd): SessionArgs| {
                let conn = conn.clone();
                async move {
                    let opened = match turns::session_cwd(cwd) {
                        Ok(cwd) => conn.client.resume_session(&sid, &cwd).await,
                        Err(e) => Err(e),
                    }
                    .map(|answer| (answer, Vec::new()));
                    turns::opened_session(&lua, &conn, opened, Some(&sid)).await
                }
            })
        },
    },
    HostFn {
        name: "fork-session",
        args: "conn session-id ?cwd",
        doc: "session/fork of SESSION-ID in ?CWD, when the agent advertises it (else a \
              :capability error): a new session of the agent that starts with SESSION-ID's \
              history (cheaper than a cold start with a caching provider). Returns the new \
              session's table as client.new-session does.",
        make: |lua| {
            create_async_function(lua, |lua, (conn, sid, cwd): SessionArgs| {
                let conn = conn.clone();
                async move {
                    let opened = match turns::session_cwd(cwd) {
                        Ok(cwd) => conn.client.fork_session(&sid, &cwd).await,
                        Err(e) => Err(e),
                    };
                    turns::opened_session(&lua, &conn, opened, None).await
                }
            })
        },
    },
    HostFn {
        name: "list-sessions",
        args: "conn ?opts",
        doc: "One page of session/list, as on the wire ({:sessions :nextCursor}), when the agent \
              advertises it. ?OPTS: :cwd, :cursor.",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (conn, opts): (UserDataRef<Conn>, Option<Table>)| {
                    let conn = conn.clone();
                    async move {
                        let get = |key: &str| -> mlua::Result<Option<String>> {
                            Ok(opts.as_ref().map(|o| o.get(key)).transpose()?.flatten())
                        };
                        let (cwd, cursor) = (get("cwd")?, get("cursor")?);
                        let r = conn
                            .client
                            .list_sessions(
                                cwd.as_deref().map(std::path::Path::new),
                                cursor.as_deref(),
                            )
                            .await;
                        outcome(&lua, r.map(|v| json_value(&lua, &v)))
                    }
                },
            )
        },
    },
    HostFn {
        name: "prompt",
        args: "conn session-id prompt ?opts",
        doc: "Send PROMPT (a string, or content blocks) to the session and wait for the end of \
              the turn, suspending only this coroutine. ?OPTS: :on-update, :timeout (seconds), \
              :keep-updates? (default true), :cancel-with-prompt? (cancel the turn when the oml \
              prompt this coroutine runs for is cancelled; default false). Returns \
              {:stop-reason :text :updates :session-id :turn}, :text being the agent's final \
              message (its text since its last tool call).",
        make: |lua| {
            create_async_function(lua, |lua, (conn, sid, content, opts): PromptArgs| {
                let conn = conn.clone();
                async move { outcome(&lua, turns::prompt(&lua, &conn, sid, content, opts).await) }
            })
        },
    },
    HostFn {
        name: "cancel",
        args: "conn session-id",
        doc: "Send session/cancel: pending permission requests of the turn are answered \
              cancelled, and the running prompt returns :stop-reason \"cancelled\" when the \
              agent ends the turn. Returns nil.",
        make: |lua| {
            create_async_function(lua, |lua, (conn, sid): (UserDataRef<Conn>, String)| {
                let conn = conn.clone();
                async move { outcome(&lua, conn.client.cancel(&sid).await.map(|()| Value::Nil)) }
            })
        },
    },
    HostFn {
        name: "logout",
        args: "conn",
        doc: "logout, when the agent advertises it (agentCapabilities.auth.logout; else a \
              :capability error). Returns nil.",
        make: |lua| {
            create_async_function(lua, |lua, conn: UserDataRef<Conn>| {
                let conn = conn.clone();
                async move { outcome(&lua, conn.client.logout().await.map(|()| Value::Nil)) }
            })
        },
    },
    HostFn {
        name: "close-session",
        args: "conn session-id",
        doc: "session/close, when the agent advertises it (else a :capability error). Returns nil.",
        make: |lua| {
            create_async_function(lua, |lua, (conn, sid): (UserDataRef<Conn>, String)| {
                let conn = conn.clone();
                async move {
                    let closed = conn.client.close_session(&sid).await;
                    outcome(&lua, closed.map(|()| Value::Nil))
                }
            })
        },
    },
    HostFn {
        name: "delete-session",
        args: "conn session-id",
        doc: "session/delete, when the agent advertises it (else a :capability error): the agent \
              forgets the stored session. Returns nil.",
        make: |lua| {
            create_async_function(lua, |lua, (conn, sid): (UserDataRef<Conn>, String)| {
                let conn = conn.clone();
                async move {
                    let deleted = conn.client.delete_session(&sid).await;
                    outcome(&lua, deleted.map(|()| Value::Nil))
                }
            })
        },
    },
    HostFn {
        name: "close",
        args: "conn",
        doc: "Close the connection and end the agent (bounded, idempotent). Returns true when \
              the agent exited by itself within the grace period on the first call, else false.",
        make: |lua| {
            create_async_function(lua, |lua, conn: UserDataRef<Conn>| {
                let conn = conn.clone();
                async move { outcome(&lua, Ok(conn.client.close().await)) }
            })
        },
    },
    HostFn {
        name: "set-mode",
        args: "conn session-id mode-id",
        doc: "session/set_mode to MODE-ID. Returns the agent's answer.",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (conn, sid, mode): (UserDataRef<Conn>, String, String)| {
                    let conn = conn.clone();
                    async move {
                        let r = conn.client.set_mode(&sid, &mode).await;
                        outcome(&lua, r.map(|v| json_value(&lua, &v)))
                    }
                },
            )
        },
    },
    HostFn {
        name: "set-config-option",
        args: "conn session-id config-id value",
        doc: "session/set_config_option CONFIG-ID to VALUE. Returns the answer (the full \
              configOptions).",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (conn, sid, id, value): (UserDataRef<Conn>, String, String, Value)| {
                    let conn = conn.clone();
                    async move {
                        let value = from_lua(&lua, value)?;
                        let r = conn.client.set_config_option(&sid, &id, value).await;
                        outcome(&lua, r.map(|v| json_value(&lua, &v)))
                    }
                },
            )
        },
    },
    HostFn {
        name: "set-model",
        args: "conn session-id model-id",
        doc: "The legacy, unstable session/set_model to MODEL-ID, for agents that send models \
              but no model config option. Returns the agent's answer.",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (conn, sid, model): (UserDataRef<Conn>, String, String)| {
                    let conn = conn.clone();
                    async move {
                        let r = conn.client.set_model(&sid, &model).await;
                        outcome(&lua, r.map(|v| json_value(&lua, &v)))
                    }
                },
            )
        },
    },
];

/// Arguments of `client.load-session` and `client.resume-session`.
type SessionArgs = (UserDataRef<Conn>, String, Option<String>);
/// Arguments of `client.prompt`.
type PromptArgs = (UserDataRef<Conn>, String, Value, Option<Table>);

/// Installs the `client` functions. Called by `cli::boot`.
pub fn install(lisp: &Lisp) -> mlua::Result<()> {
    let lua = lisp.lua();
    let client = crate::lisp::surface::namespace(lua, "client")?;
    let raw = lua.create_table()?;
    fill(lua, &raw, RAW)?;
    fill(lua, &raw, ask::RAW)?;
    let spawn = lua.create_function(spawn)?;
    let wait = create_async_function(lua, wait)?;
    let mt: Table = lua
        .load(GLUE_BYTECODE)
        .set_name(format!("@{GLUE_FILE}"))
        .set_mode(mlua::chunk::ChunkMode::Binary)
        .call((client, raw, spawn, wait))?;
    lua.set_named_registry_value(ERROR_MT, mt)?;
    if let Some(lisp) = Lisp::from_lua(lua) {
        lisp.register_source(GLUE_FILE, include_str!("client.fnl"));
    }
    Ok(())
}

/// `spawn` for `client.spawn`: runs `f` in a coroutine of its own; returns its handle. `f`
/// returns a packed `pcall` result, or the handle gets `{false, message}` when the run failed.
fn spawn(lua: &Lua, f: Function) -> mlua::Result<Spawned> {
    let lisp = Lisp::from_lua(lua)
        .ok_or_else(|| mlua::Error::RuntimeError("the Lisp host is gone".into()))?;
    let handle = Spawned::default();
    let slot = handle.slot.clone();
    tokio::spawn(async move {
        let result: Result<Value, _> = lisp.run(f, (), &CancelToken::new()).await;
        let value = match result {
            Ok(v) => v,
            Err(e) => {
                let lua = lisp.lua();
                match (lua.create_string(e.to_string()), lua.create_table()) {
                    (Ok(msg), Ok(t)) => {
                        let _ = t.raw_set(1, false);
                        let _ = t.raw_set(2, msg);
                        let _ = t.raw_set("n", 2);
                        Value::Table(t)
                    }
                    _ => Value::Nil,
                }
            }
        };
        *slot.0.lock() = Some(value);
        slot.1.notify_waiters();
    });
    Ok(handle)
}

/// `wait` for `client.join`: the value the spawned coroutine left in its slot, once it is there.
async fn wait(_: Lua, handle: UserDataRef<Spawned>) -> mlua::Result<Value> {
    let slot = handle.slot.clone();
    loop {
        let notified = slot.1.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(v) = slot.0.lock().clone() {
            return Ok(v);
        }
        notified.await;
    }
}

/// `(true, value)` or `(false, error-table)`.
fn outcome<T: mlua::IntoLua>(lua: &Lua, r: Result<T, ClientError>) -> mlua::Result<MultiValue> {
    match r {
        Ok(v) => {
            let mut m = MultiValue::new();
            m.push_back(Value::Boolean(true));
            m.push_back(v.into_lua(lua)?);
            Ok(m)
        }
        Err(e) => {
            let mut m = MultiValue::new();
            m.push_back(Value::Boolean(false));
            m.push_back(Value::Table(error_table(lua, &e)?));
            Ok(m)
        }
    }
}

fn error_table(lua: &Lua, e: &ClientError) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("category", e.category.as_str())?;
    t.set("message", e.message.as_str())?;
    if let Some(code) = e.code {
        t.set("code", code)?;
    }
    if let Some(data) = &e.data {
        t.set("data", to_lua(lua, data)?)?;
    }
    let mt: Table = lua.named_registry_value(ERROR_MT)?;
    t.set_metatable(Some(mt))?;
    Ok(t)
}

fn lua_error(e: mlua::Error) -> ClientError {
    ClientError::new(Category::Protocol, format!("bad argument: {e}"))
}

fn json_value(lua: &Lua, v: &serde_json::Value) -> Value {
    to_lua(lua, v).unwrap_or(Value::Nil)
}
/// `client.new-session`'s options: `:mcp-servers` (ACP `McpServer` objects, sent as given)
/// and `:additional-directories` (paths; other entries are passed over).
#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct NewSessionOpts {
    #[serde(default)]
    mcp_servers: Option<serde_json::Value>,
    #[serde(default)]
    additional_directories: Loose<Vec<serde_json::Value>>,
}

impl NewSessionOpts {
    fn read(opts: serde_json::Value) -> NewSessionOpts {
        serde_json::from_value(opts).unwrap_or_default()
    }

    /// The servers; none, or an empty Lua table, is an empty list.
    fn servers(&self) -> serde_json::Value {
        match &self.mcp_servers {
            None => serde_json::Value::Array(Vec::new()),
            Some(serde_json::Value::Object(m)) if m.is_empty() => {
                serde_json::Value::Array(Vec::new())
            }
            Some(other) => other.clone(),
        }
    }

    fn more(&self) -> Vec<PathBuf> {
        let dirs = self.additional_directories.get().into_iter().flatten();
        dirs.filter_map(|d| String::deserialize(d).ok().map(PathBuf::from))
            .collect()
    }
}
