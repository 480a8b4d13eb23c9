//! The `client` namespace: oml as an ACP client, from Lisp (see docs/src/acp-client.md).
//!
//! The Rust core (`crate::acp_client`) does the work; this module converts data, runs Lisp
//! callbacks, and turns failures into error tables `{:category :message :code :data}` with a
//! `__tostring`. Host functions return `(true, ...)` or `(false, err)` and a small Lua wrapper
//! raises the error table, because a Rust callback cannot raise an arbitrary Lua value.
//!
//! Prompts are async host functions: they suspend only the calling coroutine, so several
//! sessions or connections run at once, and `client.cancel` works from another coroutine.
//! Callbacks of a turn run in the prompt's own coroutine, in order, before the prompt returns;
//! late updates run in a coroutine of their own.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mlua::{
    Function, Lua, LuaSerdeExt, MultiValue, RegistryKey, Table, UserData, UserDataMethods, Value,
};
use serde_json::json;
use tokio::sync::Notify;

use crate::acp_client::{
    Category, Client, ClientError, ConnectOptions, OutOfTurn, PermissionDecision,
    PermissionHandler, PermissionRequest, Spawn, TurnEvent, Update,
};
use crate::cancel::CancelToken;
use crate::lisp::{Lisp, from_lua, to_lua};

/// A connection as Lisp holds it.
#[derive(Clone)]
pub struct Conn {
    client: Client,
    state: Arc<ConnState>,
}

struct ConnState {
    on_update: Option<RegistryKey>,
    /// Per session: the last turn's number, its callback and its `updates` table, so a late
    /// update reaches the same callback and is appended to the same list.
    last_turns: Mutex<HashMap<String, LastTurn>>,
}

struct LastTurn {
    number: u64,
    callback: Option<RegistryKey>,
    /// The turn's `updates` list, unless the prompt asked not to keep updates.
    updates: Option<RegistryKey>,
}

impl UserData for Conn {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method("__tostring", |_, this, ()| Ok(this.client.describe()));
        methods.add_method("pid", |_, this, ()| Ok(this.client.process().pid()));
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
        methods.add_method("done?", |_, this, ()| {
            Ok(this
                .slot
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some())
        });
    }
}

const GLUE: &str = r#"
local client, raw, spawn, wait = ...
local mt = {__name = "acp-error"}
mt.__tostring = function(e)
  local s = "ACP " .. tostring(e.category) .. " error: " .. tostring(e.message)
  if e.code then s = s .. " (code " .. tostring(e.code) .. ")" end
  return s
end
local pack, unpack = table.pack, table.unpack
local function wrap(f)
  return function(...)
    local r = pack(f(...))
    if r[1] then return unpack(r, 2, r.n) end
    error(r[2], 0)
  end
end
for name, f in pairs(raw) do client[name] = wrap(f) end
client.spawn = function(f, ...)
  local args = pack(...)
  return spawn(function() return pack(pcall(f, unpack(args, 1, args.n))) end)
end
client.join = function(h)
  local r = wait(h)
  if r[1] then return unpack(r, 2, r.n) end
  error(r[2], 0)
end

-- Named agents (see docs/src/agents.md).
oml["defsetting*"]("client.default-agent", nil, {type = "string?",
  doc = "The name of the agent (client.defagent) that (client.connect) with no command starts."})
client.agents = client.agents or {}
local function config_error(message, data)
  return setmetatable({category = "config", message = message, data = data}, mt)
end
client.defagent = function(id, cfg)
  if type(id) ~= "string" or id == "" then
    error("client.defagent: the first argument is the agent's name, a string", 2)
  end
  if type(cfg) ~= "table" or type(cfg.command) ~= "string" then
    error("client.defagent: expected (client.defagent :name {:command \"/path\" :args [...] :env {...}})", 2)
  end
  local args, env = {}, {}
  for i, a in ipairs(cfg.args or {}) do
    if type(a) ~= "string" then error("client.defagent: :args are strings", 2) end
    args[i] = a
  end
  for k, v in pairs(cfg.env or {}) do env[k] = v end
  client.agents[id] = {command = cfg.command, args = args, env = env}
  return id
end
local connect_command = client.connect
client.connect = function(what, args, opts)
  if what == nil then
    local id = oml.setting("client.default-agent")
    if id == nil then
      local message, fennel = catalog["missing-default-message"]()
      error(config_error(message, {fennel = fennel}), 0)
    end
    if client.agents[id] == nil then
      error(config_error("client.default-agent is " .. id .. ", but no agent of that name is defined; "
        .. "add (client.defagent :" .. id .. " {:command \"/path/to/agent\" :args [...]}) "
        .. "(`oml agents` prints one for each agent found on PATH)", {agent = id}), 0)
    end
    what = id
  end
  local cfg = client.agents[what]
  if cfg == nil then return connect_command(what, args, opts) end
  -- By name, the second argument is the options.
  local o = {}
  for k, v in pairs(args or {}) do o[k] = v end
  local env = {}
  for k, v in pairs(cfg.env) do env[k] = v end
  for k, v in pairs((args or {}).env or {}) do env[k] = v end
  o.env = env
  return connect_command(cfg.command, cfg.args, o)
end
return mt
"#;

/// Installs the `client` functions. Called by `cli::boot`.
pub fn install(lisp: &Lisp) -> mlua::Result<()> {
    let lua = lisp.lua();
    let client: Table = match lua.globals().get::<Value>("client")? {
        Value::Table(t) => t,
        _ => {
            let t = lua.create_table()?;
            lua.globals().set("client", &t)?;
            t
        }
    };
    let raw = lua.create_table()?;

    let l = lisp.clone();
    raw.set(
        "connect",
        crate::lisp::create_async_function(
            lua,
            move |lua, (command, args, opts): (String, Option<Table>, Option<Table>)| {
                let lisp = l.clone();
                async move { outcome(&lua, connect(&lisp, command, args, opts).await) }
            },
        )?,
    )?;
    raw.set(
        "capabilities",
        lua.create_function(|lua, conn: mlua::UserDataRef<Conn>| {
            outcome(lua, capabilities(lua, &conn.client))
        })?,
    )?;
    raw.set(
        "new-session",
        crate::lisp::create_async_function(
            lua,
            |lua, (conn, cwd): (mlua::UserDataRef<Conn>, Option<String>)| {
                let conn = conn.clone();
                async move {
                    let opened = match session_cwd(cwd) {
                        Ok(cwd) => conn.client.new_session(&cwd).await,
                        Err(e) => Err(e),
                    };
                    opened_session(&lua, &conn, opened, None).await
                }
            },
        )?,
    )?;
    raw.set(
        "load-session",
        crate::lisp::create_async_function(
            lua,
            |lua, (conn, sid, cwd): (mlua::UserDataRef<Conn>, String, Option<String>)| {
                let conn = conn.clone();
                async move {
                    let opened = match session_cwd(cwd) {
                        Ok(cwd) => conn.client.load_session(&sid, &cwd).await,
                        Err(e) => Err(e),
                    };
                    opened_session(&lua, &conn, opened, Some(&sid)).await
                }
            },
        )?,
    )?;
    raw.set(
        "resume-session",
        crate::lisp::create_async_function(
            lua,
            |lua, (conn, sid, cwd): (mlua::UserDataRef<Conn>, String, Option<String>)| {
                let conn = conn.clone();
                async move {
                    let opened = match session_cwd(cwd) {
                        Ok(cwd) => conn.client.resume_session(&sid, &cwd).await,
                        Err(e) => Err(e),
                    }
                    .map(|answer| (answer, Vec::new()));
                    opened_session(&lua, &conn, opened, Some(&sid)).await
                }
            },
        )?,
    )?;
    raw.set(
        "list-sessions",
        crate::lisp::create_async_function(
            lua,
            |lua, (conn, opts): (mlua::UserDataRef<Conn>, Option<Table>)| {
                let conn = conn.clone();
                async move {
                    let cwd: Option<String> =
                        opts.as_ref().map(|o| o.get("cwd")).transpose()?.flatten();
                    let cursor: Option<String> = opts
                        .as_ref()
                        .map(|o| o.get("cursor"))
                        .transpose()?
                        .flatten();
                    let r = conn
                        .client
                        .list_sessions(cwd.as_deref().map(std::path::Path::new), cursor.as_deref())
                        .await;
                    outcome(&lua, r.map(|v| json_value(&lua, &v)))
                }
            },
        )?,
    )?;
    raw.set(
        "prompt",
        crate::lisp::create_async_function(
            lua,
            |lua,
             (conn, sid, content, opts): (
                mlua::UserDataRef<Conn>,
                String,
                Value,
                Option<Table>,
            )| {
                let conn = conn.clone();
                async move { outcome(&lua, prompt(&lua, &conn, sid, content, opts).await) }
            },
        )?,
    )?;
    raw.set(
        "cancel",
        crate::lisp::create_async_function(
            lua,
            |lua, (conn, sid): (mlua::UserDataRef<Conn>, String)| {
                let conn = conn.clone();
                async move { outcome(&lua, conn.client.cancel(&sid).await.map(|()| Value::Nil)) }
            },
        )?,
    )?;
    raw.set(
        "close-session",
        crate::lisp::create_async_function(
            lua,
            |lua, (conn, sid): (mlua::UserDataRef<Conn>, String)| {
                let conn = conn.clone();
                async move {
                    outcome(
                        &lua,
                        conn.client.close_session(&sid).await.map(|()| Value::Nil),
                    )
                }
            },
        )?,
    )?;
    raw.set(
        "close",
        crate::lisp::create_async_function(lua, |lua, conn: mlua::UserDataRef<Conn>| {
            let conn = conn.clone();
            async move { outcome(&lua, Ok(conn.client.close().await)) }
        })?,
    )?;
    raw.set(
        "set-mode",
        crate::lisp::create_async_function(
            lua,
            |lua, (conn, sid, mode): (mlua::UserDataRef<Conn>, String, String)| {
                let conn = conn.clone();
                async move {
                    let r = conn.client.set_mode(&sid, &mode).await;
                    outcome(&lua, r.map(|v| json_value(&lua, &v)))
                }
            },
        )?,
    )?;
    raw.set(
        "set-config-option",
        crate::lisp::create_async_function(
            lua,
            |lua, (conn, sid, id, value): (mlua::UserDataRef<Conn>, String, String, Value)| {
                let conn = conn.clone();
                async move {
                    let value = from_lua(&lua, value)?;
                    let r = conn.client.set_config_option(&sid, &id, value).await;
                    outcome(&lua, r.map(|v| json_value(&lua, &v)))
                }
            },
        )?,
    )?;
    raw.set(
        "set-model",
        crate::lisp::create_async_function(
            lua,
            |lua, (conn, sid, model): (mlua::UserDataRef<Conn>, String, String)| {
                let conn = conn.clone();
                async move {
                    let r = conn.client.set_model(&sid, &model).await;
                    outcome(&lua, r.map(|v| json_value(&lua, &v)))
                }
            },
        )?,
    )?;

    let l = lisp.clone();
    let spawn = lua.create_function(move |_, f: Function| {
        let handle = Spawned::default();
        let slot = handle.slot.clone();
        let lisp = l.clone();
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
            *slot.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
            slot.1.notify_waiters();
        });
        Ok(handle)
    })?;
    let wait = crate::lisp::create_async_function(lua, |_, handle: mlua::UserDataRef<Spawned>| {
        let slot = handle.slot.clone();
        async move {
            loop {
                let notified = slot.1.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if let Some(v) = slot
                    .0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
                {
                    return Ok(v);
                }
                notified.await;
            }
        }
    })?;

    let glue: Function = lua.load(GLUE).set_name("=client-glue").into_function()?;
    let mt: Table = glue.call((client.clone(), raw, spawn, wait))?;
    lua.set_named_registry_value("oml.client.error-mt", mt)?;
    Ok(())
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
    let mt: Table = lua.named_registry_value("oml.client.error-mt")?;
    t.set_metatable(Some(mt))?;
    Ok(t)
}

fn lua_error(e: mlua::Error) -> ClientError {
    ClientError::new(Category::Protocol, format!("bad argument: {e}"))
}

fn json_value(lua: &Lua, v: &serde_json::Value) -> Value {
    to_lua(lua, v).unwrap_or(Value::Nil)
}

fn seconds(t: &Table, key: &str) -> Result<Option<Duration>, ClientError> {
    let v: Option<f64> = t.get(key).map_err(lua_error)?;
    Ok(v.filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64))
}

async fn connect(
    lisp: &Lisp,
    command: String,
    args: Option<Table>,
    opts: Option<Table>,
) -> Result<Conn, ClientError> {
    let lua = lisp.lua();
    let args: Vec<String> = match args {
        Some(t) => t
            .sequence_values::<String>()
            .collect::<mlua::Result<_>>()
            .map_err(lua_error)?,
        None => Vec::new(),
    };
    let mut options = ConnectOptions {
        spawn: Spawn {
            command,
            args,
            ..Spawn::default()
        },
        ..ConnectOptions::default()
    };
    let mut on_update = None;
    if let Some(opts) = &opts {
        if let Some(env) = opts.get::<Option<Table>>("env").map_err(lua_error)? {
            for pair in env.pairs::<String, String>() {
                options.spawn.env.push(pair.map_err(lua_error)?);
            }
        }
        options.spawn.cwd = opts
            .get::<Option<String>>("cwd")
            .map_err(lua_error)?
            .map(PathBuf::from);
        options.request_timeout = seconds(opts, "request-timeout")?;
        options.startup_timeout = seconds(opts, "startup-timeout")?;
        if let Some(f) = opts
            .get::<Option<Function>>("on-permission")
            .map_err(lua_error)?
        {
            options.on_permission = Some(permission_handler(lisp, f).map_err(lua_error)?);
        }
    }
    if options.on_permission.is_none() && ASK_ON_TERMINAL.load(Ordering::SeqCst) {
        options.on_permission = Some(terminal_permission_handler());
    }
    if let Some(opts) = &opts
        && let Some(f) = opts
            .get::<Option<Function>>("on-update")
            .map_err(lua_error)?
    {
        on_update = Some(lua.create_registry_value(f).map_err(lua_error)?);
    }
    let client = Client::connect(options).await?;
    let conn = Conn {
        client: client.clone(),
        state: Arc::new(ConnState {
            on_update,
            last_turns: Mutex::new(HashMap::new()),
        }),
    };
    if let Some(mut rx) = client.take_out_of_turn() {
        let lisp = lisp.clone();
        let state = Arc::clone(&conn.state);
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                if let Err(e) = deliver_out_of_turn(&lisp, &state, event).await {
                    tracing::warn!("an out-of-turn update callback failed: {e}");
                }
            }
        });
    }
    Ok(conn)
}

/// A late update (or one before any turn): appended to its turn's `updates` when that turn is
/// the session's last, and given to that turn's callback, else to the connection's.
async fn deliver_out_of_turn(
    lisp: &Lisp,
    state: &ConnState,
    event: OutOfTurn,
) -> Result<(), crate::lisp::LispError> {
    let lua = lisp.lua();
    let t = update_table(lua, &event.session_id, &event.update)?;
    let mut callback: Option<Function> = None;
    {
        let turns = state
            .last_turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(last) = turns.get(&event.session_id)
            && Some(last.number) == event.update.turn
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

/// Set while the interactive terminal REPL runs: a connection made without `:on-permission`
/// then asks the user on the terminal instead of rejecting.
static ASK_ON_TERMINAL: AtomicBool = AtomicBool::new(false);

/// Called by the interactive REPL (and only there): permission requests of connections without
/// a handler are asked on the terminal. Headless programs never prompt; they reject safely.
pub fn ask_on_terminal(enabled: bool) {
    ASK_ON_TERMINAL.store(enabled, Ordering::SeqCst);
}

/// Asks on the controlling terminal (`/dev/tty`): the tool call's title and kind, the options
/// numbered; an empty, unreadable or unknown answer rejects. The REPL's line editor is idle
/// while a form waits for its prompt, so the terminal is free. A turn cancelled meanwhile is
/// answered `cancelled` by the client whatever is typed.
fn terminal_permission_handler() -> PermissionHandler {
    Arc::new(|request: PermissionRequest| {
        Box::pin(async move {
            let answer = tokio::task::spawn_blocking(move || ask_tty(&request))
                .await
                .map_err(|e| format!("the terminal question failed: {e}"))?;
            Ok(answer)
        })
    })
}

fn ask_tty(request: &PermissionRequest) -> PermissionDecision {
    use std::io::{BufRead as _, Write as _};
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return PermissionDecision::Reject;
    };
    let options: Vec<(String, String)> = request
        .options
        .as_array()
        .map(|o| {
            o.iter()
                .map(|o| {
                    let id = o["optionId"].as_str().unwrap_or("").to_owned();
                    let name = o["name"].as_str().unwrap_or(&id).to_owned();
                    (id, name)
                })
                .collect()
        })
        .unwrap_or_default();
    let title = request.tool_call["title"]
        .as_str()
        .or(request.tool_call["toolCallId"].as_str())
        .unwrap_or("a tool call");
    let kind = request.tool_call["kind"].as_str().unwrap_or("other");
    let mut out = &tty;
    let mut text = format!("\nThe agent asks permission for: {title} ({kind})\n");
    for (i, (_, name)) in options.iter().enumerate() {
        text.push_str(&format!("  {}) {name}\n", i + 1));
    }
    text.push_str(&format!(
        "Choose 1-{} (anything else rejects): ",
        options.len()
    ));
    if out
        .write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        return PermissionDecision::Reject;
    }
    let mut line = String::new();
    if std::io::BufReader::new(&tty).read_line(&mut line).is_err() {
        return PermissionDecision::Reject;
    }
    match line.trim().parse::<usize>() {
        Ok(n) if (1..=options.len()).contains(&n) => {
            PermissionDecision::Option(options[n - 1].0.clone())
        }
        _ => PermissionDecision::Reject,
    }
}

fn permission_handler(lisp: &Lisp, f: Function) -> mlua::Result<PermissionHandler> {
    let key = Arc::new(lisp.lua().create_registry_value(f)?);
    let lisp = lisp.clone();
    Ok(Arc::new(move |request: PermissionRequest| {
        let lisp = lisp.clone();
        let key = Arc::clone(&key);
        Box::pin(async move {
            let lua = lisp.lua();
            let arg = (|| -> mlua::Result<(Function, Table)> {
                let f: Function = lua.registry_value(&key)?;
                let t = lua.create_table()?;
                t.set("session-id", request.session_id.as_str())?;
                t.set("tool-call", to_lua(lua, &request.tool_call)?)?;
                t.set("options", to_lua(lua, &request.options)?)?;
                Ok((f, t))
            })();
            let (f, t) = arg.map_err(|e| e.to_string())?;
            let answer: Value = lisp
                .run(f, t, &request.cancel)
                .await
                .map_err(|e| format!("the permission handler failed: {e}"))?;
            let Value::String(s) = answer else {
                return Err(format!(
                    "the permission handler returned {}, not an option id, :allow, :reject or :cancel",
                    answer.type_name()
                ));
            };
            let s = s.to_str().map_err(|e| e.to_string())?.to_owned();
            let offered = request.options.as_array().is_some_and(|o| {
                o.iter()
                    .any(|o| o.get("optionId").and_then(|i| i.as_str()) == Some(&s))
            });
            Ok(match s.as_str() {
                _ if offered => PermissionDecision::Option(s),
                "allow" => PermissionDecision::Allow,
                "reject" => PermissionDecision::Reject,
                "cancel" => PermissionDecision::Cancel,
                _ => PermissionDecision::Option(s),
            })
        })
    }))
}

fn capabilities(lua: &Lua, client: &Client) -> Result<Table, ClientError> {
    let init = client.initialize_response();
    let caps = init.get("agentCapabilities").cloned().unwrap_or(json!({}));
    let flag = |v: Option<&serde_json::Value>| {
        !matches!(
            v,
            None | Some(serde_json::Value::Null | serde_json::Value::Bool(false))
        )
    };
    let session = caps.get("sessionCapabilities");
    let prompt = caps.get("promptCapabilities");
    let mcp = caps.get("mcpCapabilities");
    let data = json!({
        "protocol-version": init.get("protocolVersion"),
        "load-session": flag(caps.get("loadSession")),
        "list-sessions": flag(session.and_then(|s| s.get("list"))),
        "close-session": flag(session.and_then(|s| s.get("close"))),
        "resume-session": flag(session.and_then(|s| s.get("resume"))),
        "delete-session": flag(session.and_then(|s| s.get("delete"))),
        "additional-directories": flag(session.and_then(|s| s.get("additionalDirectories"))),
        "system-prompt": flag(session.and_then(|s| s.get("systemPrompt"))),
        "image-content": flag(prompt.and_then(|s| s.get("image"))),
        "audio-content": flag(prompt.and_then(|s| s.get("audio"))),
        "embedded-context": flag(prompt.and_then(|s| s.get("embeddedContext"))),
        "mcp-http": flag(mcp.and_then(|s| s.get("http"))),
        "mcp-sse": flag(mcp.and_then(|s| s.get("sse"))),
        "logout": flag(caps.get("auth").and_then(|s| s.get("logout"))),
        "agent-capabilities": caps,
        "auth-methods": init.get("authMethods").cloned().unwrap_or(json!([])),
        "agent-info": init.get("agentInfo"),
    });
    match to_lua(lua, &data).map_err(lua_error)? {
        Value::Table(t) => Ok(t),
        _ => unreachable!("an object converts to a table"),
    }
}

fn session_cwd(cwd: Option<String>) -> Result<PathBuf, ClientError> {
    match cwd {
        Some(c) => Ok(PathBuf::from(c)),
        None => std::env::current_dir().map_err(|e| {
            ClientError::new(Category::Connection, format!("no current directory: {e}"))
        }),
    }
}

/// `{:session-id :modes :config-options :models :updates :response}`; the updates that came
/// before the answer also go to the connection's callback, in order, from this coroutine.
/// What `new-session`, `load-session` and `resume-session` return: the session table for the
/// agent's answer and the updates held before it, or the error value. `sid` is written into the
/// answer when given (load and resume answers do not carry the id).
async fn opened_session(
    lua: &Lua,
    conn: &Conn,
    opened: Result<(serde_json::Value, Vec<Update>), ClientError>,
    sid: Option<&str>,
) -> mlua::Result<MultiValue> {
    match opened {
        Ok((mut answer, held)) => {
            if let Some(sid) = sid {
                answer["sessionId"] = json!(sid);
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
        let sid = answer
            .get("sessionId")
            .and_then(|s| s.as_str())
            .unwrap_or_default()
            .to_owned();
        t.set("session-id", sid.as_str())?;
        for (wire, key) in [
            ("modes", "modes"),
            ("configOptions", "config-options"),
            ("models", "models"),
        ] {
            if let Some(v) = answer.get(wire).filter(|v| !v.is_null()) {
                t.set(key, to_lua(lua, v)?)?;
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
    t.set("kind", u.kind())?;
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

fn prompt_blocks(lua: &Lua, content: Value) -> Result<serde_json::Value, ClientError> {
    match content {
        Value::String(s) => Ok(json!([{"type": "text", "text": s.to_string_lossy()}])),
        Value::Table(_) => {
            let v = from_lua(lua, content).map_err(lua_error)?;
            Ok(match v {
                serde_json::Value::Object(_) => json!([v]),
                serde_json::Value::Array(_) => v,
                _ => json!([]),
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

async fn prompt(
    lua: &Lua,
    conn: &Conn,
    sid: String,
    content: Value,
    opts: Option<Table>,
) -> Result<Table, ClientError> {
    let blocks = prompt_blocks(lua, content)?;
    let mut callback: Option<Function> = None;
    let mut own_callback = false;
    let mut timeout = None;
    let mut keep = true;
    if let Some(opts) = &opts {
        callback = opts.get("on-update").map_err(lua_error)?;
        own_callback = callback.is_some();
        timeout = seconds(opts, "timeout")?;
        keep = match opts.get::<Value>("keep-updates?").map_err(lua_error)? {
            Value::Nil => true,
            Value::Boolean(b) => b,
            other => {
                return Err(ClientError::new(
                    Category::Protocol,
                    format!(
                        "bad argument: :keep-updates? must be a boolean, got {}",
                        other.type_name()
                    ),
                ));
            }
        };
    }
    if callback.is_none()
        && let Some(key) = &conn.state.on_update
    {
        callback = Some(lua.registry_value(key).map_err(lua_error)?);
    }
    let updates = lua.create_table().map_err(lua_error)?;
    updates
        .set_metatable(Some(lua.array_metatable()))
        .map_err(lua_error)?;
    let mut turn = conn.client.prompt(&sid, blocks, timeout)?;
    let stop = loop {
        match turn.next().await {
            TurnEvent::Updates(batch) => {
                for u in &batch {
                    let t = update_table(lua, &sid, u).map_err(lua_error)?;
                    if keep {
                        updates.raw_push(t.clone()).map_err(lua_error)?;
                    }
                    if let Some(f) = &callback {
                        f.call_async::<()>(t).await.map_err(|e| {
                            ClientError::new(
                                Category::Protocol,
                                format!("the on-update callback failed: {e}"),
                            )
                        })?;
                    }
                }
            }
            TurnEvent::Done(result) => break result,
        }
    };
    // Late updates of this turn find its list and its callback.
    let last = LastTurn {
        number: turn.number(),
        callback: match (&callback, own_callback) {
            (Some(f), true) => Some(lua.create_registry_value(f.clone()).map_err(lua_error)?),
            _ => None,
        },
        updates: if keep {
            Some(
                lua.create_registry_value(updates.clone())
                    .map_err(lua_error)?,
            )
        } else {
            None
        },
    };
    conn.state
        .last_turns
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(sid.clone(), last);
    let stop = stop?;
    let t = lua.create_table().map_err(lua_error)?;
    t.set("stop-reason", stop.0).map_err(lua_error)?;
    t.set("updates", updates).map_err(lua_error)?;
    t.set("session-id", sid).map_err(lua_error)?;
    t.set("turn", turn.number()).map_err(lua_error)?;
    Ok(t)
}
