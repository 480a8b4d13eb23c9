//! The `mcp` namespace: a session's MCP servers (`crate::mcp`) in front of the agent. The host
//! functions here list servers and tools, call a tool and restart a server; `mcp.fnl` beside it
//! declares servers (`mcp.defserver`), turns the tools into entries of `agent.tools` and adds
//! `/mcp`. The front ends call [`start_session`] when a session is set up (with the editor's
//! servers, for `oml acp`) and [`stop_session`] / [`stop_all`] when it ends. `files.rs` adds
//! the servers of Claude Code's `.mcp.json` and Codex's `config.toml` (`mcp.found`).
//!
//! Each session has its own servers, kept in the [`McpHub`] in the Lua state's app data; a
//! server's notices (failed starts, skipped tools) reach the session as `notice` events. This
//! module does not decide whether a tool may run: the tools it makes go through
//! `agent.execute-tool` and the permission policy like every other.

use rmcp::model::CallToolResult;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mlua::{Lua, Value};
use parking_lot::Mutex;
use serde_json::{Value as Json, json};

mod files;

use super::session::{session_cancel, session_id, sessions};
use crate::lisp::{
    HostFn, Lisp, LispError, SettingDecl, create_async_function, define, from_lua, to_lua,
};
use crate::mcp::{McpTool, ServerSet, ServerSpec};
use crate::session::{AgentEvent, Sessions};
static MCP_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_mcp.luac"));
const MCP_FILE: &str = "src/bind/mcp.fnl";

/// Seconds a server has to start and list its tools when `mcp.start-timeout` is unset.
pub const START_TIMEOUT_SECS: u64 = 30;
/// Seconds one tool call may take when `mcp.call-timeout` is unset.
pub const CALL_TIMEOUT_SECS: u64 = 300;
/// Characters of a tool result the model reads when `mcp.max-chars` is unset.
pub const MAX_CHARS: usize = crate::tools::READ_MAX_CHARS;

/// The session key naming the session whose MCP servers a session without its own uses (a
/// sub-agent's, set by `agent.task-session`).
const SHARED_FROM: &str = "mcp-session";

/// The servers of every open session, by session id.
#[derive(Default)]
pub struct McpHub {
    sets: Mutex<HashMap<String, Arc<ServerSet>>>,
}

impl McpHub {
    fn get(&self, sid: &str) -> Option<Arc<ServerSet>> {
        self.sets.lock().get(sid).cloned()
    }
    fn take(&self, sid: &str) -> Option<Arc<ServerSet>> {
        self.sets.lock().remove(sid)
    }
    fn take_all(&self) -> Vec<Arc<ServerSet>> {
        self.sets.lock().drain().map(|(_, s)| s).collect()
    }
}

/// Declare the `mcp.*` settings, define the host functions and load `mcp.fnl`. Needs the agent
/// (`agent`, `commands`) installed first.
pub fn install(lisp: &Lisp) -> Result<(), LispError> {
    lisp.lua().set_app_data(Arc::new(McpHub::default()));
    for decl in settings() {
        lisp.declare_setting(&decl)?;
    }
    define(lisp.lua(), "mcp", MCP)?;
    define(lisp.lua(), "mcp", files::FILES_FNS)?;
    lisp.lua()
        .load(MCP_BYTECODE)
        .set_name(format!("@{MCP_FILE}"))
        .set_mode(mlua::chunk::ChunkMode::Binary)
        .exec()?;
    lisp.register_source(MCP_FILE, include_str!("mcp.fnl"));
    Ok(())
}

fn settings() -> Vec<SettingDecl> {
    vec![
        SettingDecl::new(
            "mcp.start-timeout",
            "number",
            json!(START_TIMEOUT_SECS),
            "Seconds an MCP server has to start, answer `initialize` and list its tools; then it counts as failed (the session goes on without it).",
        ),
        SettingDecl::new(
            "mcp.call-timeout",
            "number",
            json!(CALL_TIMEOUT_SECS),
            "Seconds one MCP tool call may take; then it is abandoned (the server is told) and the model reads an error.",
        ),
        SettingDecl::new(
            "mcp.max-chars",
            "integer",
            json!(MAX_CHARS),
            "Characters of an MCP tool's result the model reads at most; the head is kept and a footer says how much was cut.",
        ),
        SettingDecl::new(
            files::SETTING,
            "boolean",
            json!(true),
            "Whether sessions also start the MCP servers Claude Code's and Codex's users configured: a trusted project's .mcp.json and the [mcp_servers] of ~/.codex/config.toml ($CODEX_HOME). oml's own servers win a name; `mcp.found` lists what was found.",
        ),
    ]
}

fn hub(lua: &Lua) -> Arc<McpHub> {
    lua.app_data_ref::<Arc<McpHub>>()
        .map(|h| Arc::clone(&h))
        .unwrap_or_default()
}

fn seconds(lisp: &Lisp, name: &str, default: u64) -> Duration {
    let secs: f64 = lisp.setting(name).unwrap_or(default as f64);
    Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::from_secs(default))
}

/// Start the servers of session `sid` in `cwd`: `mcp.server-specs` (the declared servers,
/// looked up now) merged with `extra` (the editor's; an editor server replaces a declared one
/// of the same name), then the servers of Claude Code's and Codex's files that neither names
/// (`files::found`). Returns at once; the servers start in the background, and the session's
/// first model request waits for them. A server that cannot be described, or fails to start,
/// and a file's server that is not used for a reason the user can fix, is reported to the
/// session as a notice.
pub async fn start_session(lisp: &Lisp, sid: &str, cwd: &Path, extra: Vec<ServerSpec>) {
    let Ok(sessions) = sessions(lisp.lua()) else {
        return;
    };
    let notify = notifier(&sessions, sid);
    let mut specs: Vec<ServerSpec> = Vec::new();
    let mut own: Vec<(String, String)> = extra
        .iter()
        .map(|e| (e.name.clone(), files::EDITOR.to_owned()))
        .collect();
    match lisp
        .call_json(
            "mcp.server-specs",
            &[json!(cwd.display().to_string())],
            &Default::default(),
        )
        .await
    {
        Ok(Json::Object(declared)) => {
            for (name, spec) in declared {
                match ServerSpec::from_config(&name, &spec) {
                    Ok(s) if !extra.iter().any(|e| e.name == s.name) => {
                        own.push((s.name.clone(), files::DECLARED.to_owned()));
                        specs.push(s);
                    }
                    Ok(_) => {}
                    Err(e) => notify(e.to_string()),
                }
            }
        }
        Ok(Json::Null) => {}
        Ok(Json::Array(a)) if a.is_empty() => {}
        Ok(other) => notify(format!(
            "mcp.server-specs returned {other}, not a table of servers"
        )),
        Err(e) => notify(format!("mcp.server-specs failed: {e}")),
    }
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    let found = files::found(lisp, cwd, &own);
    files::notices(&found).into_iter().for_each(|n| notify(n));
    specs.extend(found.into_iter().filter_map(|f| f.spec));
    specs.extend(extra);
    if specs.is_empty() {
        return;
    }
    let timeout = seconds(lisp, "mcp.start-timeout", START_TIMEOUT_SECS);
    let set = ServerSet::start(specs, cwd.to_path_buf(), timeout, notify);
    let old = hub(lisp.lua()).sets.lock().insert(sid.to_owned(), set);
    if let Some(old) = old {
        old.stop().await;
    }
}

/// Notices of session `sid`'s servers, as `notice` events of the session.
fn notifier(sessions: &Arc<Sessions>, sid: &str) -> crate::mcp::set::Notify {
    let (sessions, sid) = (Arc::clone(sessions), sid.to_owned());
    Arc::new(move |text: String| {
        tracing::debug!(session = %sid, "{text}");
        sessions.emit(&sid, AgentEvent::Notice { text });
    })
}

/// Stop the servers of session `sid` (stdin closed, then the process group ended).
pub async fn stop_session(lisp: &Lisp, sid: &str) {
    if let Some(set) = hub(lisp.lua()).take(sid) {
        set.stop().await;
    }
}

/// Stop the servers of every session, in parallel.
pub async fn stop_all(lisp: &Lisp) {
    let mut tasks = tokio::task::JoinSet::new();
    for set in hub(lisp.lua()).take_all() {
        tasks.spawn(async move { set.stop().await });
    }
    while tasks.join_next().await.is_some() {}
}

/// The server set of the session ?SID (the running coroutine's when nil); `None` when it has no
/// servers.
fn set_of(lua: &Lua, sid: Option<String>) -> mlua::Result<Option<Arc<ServerSet>>> {
    let sessions = sessions(lua)?;
    let sid = session_id(lua, &sessions, sid)?;
    let hub = hub(lua);
    if let Some(set) = hub.get(&sid) {
        return Ok(Some(set));
    }
    // A sub-agent uses the servers of the session it was started from (`task.fnl`).
    let from = sessions.with(&sid, |s| {
        s.data
            .get(SHARED_FROM)
            .and_then(|v| v.as_str().map(str::to_owned))
    });
    Ok(from.flatten().and_then(|from| hub.get(&from)))
}

fn tool_json(t: &McpTool) -> Json {
    json!({
        "name": t.name, "server": t.server, "tool": t.tool, "title": t.title,
        "description": t.description, "parameters": t.schema, "kind": t.kind(),
        "read-only?": t.read_only, "destructive?": t.destructive,
    })
}

fn lua_err(e: impl std::fmt::Display) -> mlua::Error {
    mlua::Error::RuntimeError(e.to_string())
}

/// Options of `mcp.call`.
#[derive(serde::Deserialize, Default)]
struct CallOpts {
    #[serde(default)]
    raw: bool,
    #[serde(default)]
    session: Option<String>,
}

/// A result as the loop's tool results are: {:content :error?}, the text cut to `max`, and,
/// when the model takes images (`llm.images?`), :images as `image_url` parts that the loop
/// passes on after the tool results.
fn rendered(lisp: &Lisp, result: &CallToolResult, max: usize) -> Json {
    let r = crate::mcp::render(result);
    let mut out =
        json!({"content": crate::tools::truncate::cap_head(&r.text, max), "error?": r.is_error});
    let images: bool = lisp.setting("llm.images?").unwrap_or(false);
    if images && !r.images.is_empty() {
        out["images"] = r
            .images
            .iter()
            .map(|url| json!({"type": "image_url", "image_url": {"url": url}}))
            .collect();
    }
    out
}

const MCP: &[HostFn] = &[
    HostFn {
        name: "start-own",
        args: "session-id specs",
        doc: "Start exactly the servers SPECS (a table of name → spec, as `mcp.defserver` takes \
              them) for the session SESSION-ID, in its directory, instead of sharing another's \
              (a sub-agent's own servers); a spec that cannot be read is reported to the \
              session as a notice. Returns at once; the servers stop with the session.",
        make: |lua| {
            create_async_function(lua, |lua, (sid, specs): (String, Value)| async move {
                let lisp = Lisp::from_lua(&lua).ok_or_else(|| lua_err("no Lisp host"))?;
                let sessions = sessions(&lua)?;
                let cwd = sessions.with(&sid, |s| s.cwd.clone());
                let cwd = cwd.ok_or_else(|| lua_err(format!("no session {sid}")))?;
                let notify = notifier(&sessions, &sid);
                let mut list = Vec::new();
                if let Json::Object(specs) = from_lua(&lua, specs)? {
                    for (name, spec) in specs {
                        match ServerSpec::from_config(&name, &spec) {
                            Ok(s) => list.push(s),
                            Err(e) => notify(e.to_string()),
                        }
                    }
                }
                let timeout = seconds(&lisp, "mcp.start-timeout", START_TIMEOUT_SECS);
                let set = ServerSet::start(list, cwd, timeout, notify);
                let old = hub(&lua).sets.lock().insert(sid, set);
                if let Some(old) = old {
                    old.stop().await;
                }
                Ok(())
            })
        },
    },
    HostFn {
        name: "servers",
        args: "?session-id",
        doc: "The MCP servers of the session (the current one, or ?SESSION-ID), in order: a list of {:name :transport :target :state :error :tools :info}; :state is starting, running, failed or stopped, :tools how many tools it offers.",
        make: |lua| {
            lua.create_function(|lua, sid: Option<String>| {
                let list: Vec<Json> = set_of(lua, sid)?
                    .map(|set| set.status())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|s| json!({"name": s.name, "transport": s.transport, "target": s.target, "state": s.state, "error": s.error, "tools": s.tools, "info": s.info}))
                    .collect();
                to_lua(lua, &Json::Array(list))
            })
        },
    },
    HostFn {
        name: "tools",
        args: "?session-id",
        doc: "The tools of the session's running MCP servers (waiting for servers still starting): a list of {:name :server :tool :title :description :parameters :kind :read-only? :destructive?}, :name being mcp__<server>__<tool>.",
        make: |lua| {
            create_async_function(lua, |lua, sid: Option<String>| async move {
                let tools = match set_of(&lua, sid)? {
                    Some(set) => set.tools().await,
                    None => Vec::new(),
                };
                to_lua(&lua, &Json::Array(tools.iter().map(tool_json).collect()))
            })
        },
    },
    HostFn {
        name: "call",
        args: "server tool args ?opts",
        doc: "Call the tool TOOL (its name on the server) of the session's MCP server SERVER with the table ARGS. Returns {:content :error?}: the result as text, cut to mcp.max-chars, with :images (image_url parts) when it holds images and llm.images? is true. ?OPTS: {:raw true} returns the raw CallToolResult table instead; {:session id} picks the session. A server that fails, exits or times out (mcp.call-timeout) gives an error result, not an error.",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (server, tool, args, opts): (String, String, Value, Option<Value>)| async move {
                    let args = from_lua(&lua, args)?;
                    let opts: CallOpts = match opts {
                        Some(v) => serde_json::from_value(from_lua(&lua, v)?).map_err(lua_err)?,
                        None => CallOpts::default(),
                    };
                    let Some(set) = set_of(&lua, opts.session)? else {
                        return to_lua(
                            &lua,
                            &json!({"content": format!("no MCP server is called {server}"), "error?": true}),
                        );
                    };
                    let lisp = Lisp::from_lua(&lua).ok_or_else(|| lua_err("no Lisp host"))?;
                    let timeout = seconds(&lisp, "mcp.call-timeout", CALL_TIMEOUT_SECS);
                    let max: usize = lisp.setting("mcp.max-chars").unwrap_or(MAX_CHARS);
                    let cancel = session_cancel(&lua);
                    let answer = match set.call(&server, &tool, args, &cancel, timeout).await {
                        // As rmcp read it, written back as JSON: the raw result for Lisp.
                        Ok(result) if opts.raw => serde_json::to_value(&result).map_err(lua_err)?,
                        Ok(result) => rendered(&lisp, &result, max),
                        Err(e) => {
                            json!({"content": format!("MCP server {server}: {e}"), "error?": true})
                        }
                    };
                    to_lua(&lua, &answer)
                },
            )
        },
    },
    HostFn {
        name: "restart",
        args: "name ?session-id",
        doc: "Stop the session's MCP server NAME and start it again; returns true once it runs, else raises why it did not start.",
        make: |lua| {
            create_async_function(
                lua,
                |lua, (name, sid): (String, Option<String>)| async move {
                    let set = set_of(&lua, sid)?
                        .ok_or_else(|| lua_err(format!("no MCP server is called {name}")))?;
                    set.restart(&name).await.map_err(lua_err)?;
                    Ok(true)
                },
            )
        },
    },
];
