//! Which MCP servers of Claude Code's and Codex's files (`crate::mcp::files`) a session in a
//! directory starts: the project's `.mcp.json` at its root (`crate::project::find_root`, else
//! the directory) only while the project is trusted (the rule of `project.trusted?`, whose
//! record covers `.mcp.json`), and the `[mcp_servers]` of Codex's `$CODEX_HOME/config.toml`
//! (the user's own) always. oml's own servers come first, then the project's, then Codex's; a
//! later server of a name already used is listed as shadowed. `mcp.found` lists them all with
//! why each is or is not used; [`found`] is what `start_session` starts from.
//!
//! It knows nothing of starting servers (`crate::mcp::set`) nor of what their tools may do: they
//! go through the permission policy like oml's own.

use std::path::{Path, PathBuf};

use mlua::Value;
use serde_json::{Value as Json, json};

use super::lua_err;
use crate::bind::project::untrusted_given;
use crate::lisp::{HostFn, Lisp, create_async_function, from_lua, to_lua};
use crate::mcp::ServerSpec;
use crate::mcp::files::{self, BadFile, CODEX_CONFIG, FileServer, MCP_JSON, Unusable};

/// The setting that turns the servers of Claude Code's and Codex's files on or off.
pub const SETTING: &str = "mcp.claude-codex?";
/// How `mcp.found` names a server declared with `mcp.defserver`.
pub const DECLARED: &str = "mcp.defserver";
/// How the servers an editor passes in its `session/new` are named.
pub const EDITOR: &str = "the editor's session";

/// One server found, used or not.
#[derive(Debug)]
pub struct Found {
    /// The server's name; for a file that gives no server at all, the file's name.
    pub name: String,
    /// The file, or [`DECLARED`].
    pub source: String,
    /// `oml`, `claude-project` or `codex-user`.
    pub origin: &'static str,
    /// The line its entry starts on, 0 when unknown.
    pub line: usize,
    pub transport: Option<&'static str>,
    /// The command line or URL as written.
    pub target: String,
    /// What to start, when it is used.
    pub spec: Option<ServerSpec>,
    pub why: Option<Skip>,
}

/// Why a server found is not used.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Skip {
    #[error("{SETTING} is false")]
    Off,
    #[error("untrusted: {0}")]
    Untrusted(String),
    #[error("{MCP_JSON} is a link leading out of the project (to {})", .0.display())]
    Escapes(PathBuf),
    #[error(transparent)]
    BadFile(#[from] BadFile),
    #[error(transparent)]
    Unusable(#[from] Unusable),
    #[error("shadowed by {0}")]
    Shadowed(String),
    /// oml's own declaration cannot be read (`crate::mcp::BadSpec`, as shown).
    #[error("{0}")]
    Declared(String),
}

impl Skip {
    /// Whether a session says why, at its start: a problem the user can fix, not a choice.
    fn worth_a_notice(&self) -> bool {
        matches!(
            self,
            Skip::Untrusted(_) | Skip::Escapes(_) | Skip::BadFile(_)
        ) || matches!(self, Skip::Unusable(u) if *u != Unusable::Disabled)
    }
}

/// The servers of the files for a session in `dir`, in precedence order, each used or with why
/// not; `own` are the names (and where from) of oml's own servers, which win.
pub fn found(lisp: &Lisp, dir: &Path, own: &[(String, String)]) -> Vec<Found> {
    let on: bool = lisp.setting(SETTING).unwrap_or(true);
    let env = |name: &str| std::env::var(name).ok();
    let root = crate::project::find_root(dir).unwrap_or_else(|| dir.to_path_buf());
    let mut out = Vec::new();
    let path = root.join(MCP_JSON);
    if let Some(text) = files::read_text(&path) {
        let text = match crate::project::escapes(&path, &root) {
            Some(real) => Err(Skip::Escapes(real)),
            None => text.map_err(Skip::from),
        };
        let servers = text
            .clone()
            .and_then(|t| files::mcp_json(&t, &env).map_err(Skip::from));
        // Trust is checked on the bytes just read: a file changed meanwhile is not trusted.
        // Off, nothing is used, and the trust record is not even read.
        let given = [(MCP_JSON, text.as_deref().unwrap_or_default().as_bytes())];
        let gate = || {
            on.then(|| untrusted_given(lisp, &root, &given).map(Skip::Untrusted))
                .flatten()
        };
        push_file(&mut out, &path, "claude-project", servers, gate);
    }
    if let Some(path) = crate::paths::codex_home().map(|d| d.join(CODEX_CONFIG))
        && let Some(text) = files::read_text(&path)
    {
        let servers = text
            .and_then(|t| files::codex_toml(&t, &env))
            .map_err(Skip::from);
        push_file(&mut out, &path, "codex-user", servers, || None);
    }
    if !on {
        // Listed, so that `mcp.found` shows what the setting turns off; nothing is noted.
        for f in &mut out {
            (f.spec, f.why) = (None, Some(Skip::Off));
        }
        return out;
    }
    let mut taken: Vec<(String, String)> = own.to_vec();
    for f in out.iter_mut().filter(|f| f.spec.is_some()) {
        let name = f.name.clone();
        match taken.iter().find(|(n, _)| *n == name) {
            Some((_, by)) => {
                f.why = Some(Skip::Shadowed(format!("{name} of {by}")));
                f.spec = None;
            }
            None => taken.push((name, f.source.clone())),
        }
    }
    out
}

/// Add the servers of the file at `path` (or its problem), each stopped by `gate` when that
/// says why (asked only when the file has servers).
fn push_file(
    out: &mut Vec<Found>,
    path: &Path,
    origin: &'static str,
    servers: Result<Vec<FileServer>, Skip>,
    gate: impl FnOnce() -> Option<Skip>,
) {
    let source = path.display().to_string();
    let servers = match servers {
        Ok(servers) => servers,
        Err(why) => {
            out.push(Found {
                name: path
                    .file_name()
                    .map_or_else(|| source.clone(), |n| n.to_string_lossy().into_owned()),
                source,
                origin,
                line: match &why {
                    Skip::BadFile(b) => b.line(),
                    _ => 0,
                },
                transport: None,
                target: String::new(),
                spec: None,
                why: Some(why),
            });
            return;
        }
    };
    let gate = (!servers.is_empty()).then(gate).flatten();
    for s in servers {
        let (spec, why) = match (s.spec, &gate) {
            (_, Some(gate)) => (None, Some(gate.clone())),
            (Ok(spec), None) => (Some(spec), None),
            (Err(e), None) => (None, Some(Skip::from(e))),
        };
        out.push(Found {
            name: s.name,
            source: source.clone(),
            origin,
            line: s.line,
            transport: s.transport,
            target: s.target,
            spec,
            why,
        });
    }
}

/// What a session says at its start of the servers that are not used for a reason the user can
/// fix: one line per file that is untrusted or cannot be read, one per other server.
pub fn notices(found: &[Found]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in found {
        let Some(why) = f.why.as_ref().filter(|w| w.worth_a_notice()) else {
            continue;
        };
        let text = match why {
            Skip::Untrusted(_) => format!("MCP servers of {} not started: {why}", f.source),
            Skip::BadFile(_) | Skip::Escapes(_) => {
                format!("MCP servers of {} not read: {why}", f.source)
            }
            _ => format!("MCP server {} of {} not started: {why}", f.name, f.source),
        };
        if !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

/// `f` as `mcp.found` gives it: a key whose value is absent is left out (nil in Lisp, where a
/// JSON null would be a value).
fn found_json(f: &Found) -> Json {
    let mut v = json!({
        "name": f.name, "source": f.source, "origin": f.origin, "target": f.target,
        "used?": f.why.is_none(),
    });
    let optional = [
        ("line", (f.line > 0).then(|| Json::from(f.line))),
        ("transport", f.transport.map(Json::from)),
        ("why", f.why.as_ref().map(|w| Json::from(w.to_string()))),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            v[key] = value;
        }
    }
    v
}

/// oml's own servers for `dir` (`mcp.server-specs`), as found entries.
async fn declared(lisp: &Lisp, dir: &str) -> Vec<Found> {
    let specs = lisp
        .call_json("mcp.server-specs", &[json!(dir)], &Default::default())
        .await;
    let Ok(Json::Object(specs)) = specs else {
        return Vec::new();
    };
    let mut out: Vec<Found> = specs
        .into_iter()
        .map(|(name, spec)| {
            let read = ServerSpec::from_config(&name, &spec);
            Found {
                transport: read.as_ref().ok().map(|s| s.transport.kind()),
                target: read
                    .as_ref()
                    .map(|s| s.transport.target())
                    .unwrap_or_default(),
                why: read.err().map(|e| Skip::Declared(e.to_string())),
                name,
                source: DECLARED.into(),
                origin: "oml",
                line: 0,
                spec: None,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

pub(super) const FILES_FNS: &[HostFn] = &[HostFn {
    name: "found",
    args: "dir",
    doc: "The MCP servers a session in DIR would start, and those it would not: oml's own \
          (`mcp.server-specs`), then the project's .mcp.json (Claude Code's, at the project \
          root, only while the project is trusted), then the [mcp_servers] of Codex's \
          $CODEX_HOME/config.toml (~/.codex). A list of {:name :source :origin :line \
          :transport :target :used? :why}: :origin is oml, claude-project or codex-user, \
          :source the file (or mcp.defserver), :target the command line or URL as written, \
          :why (when not :used?) untrusted, shadowed by an earlier server of the name, a \
          variable not set, disabled, or the file's problem (bad JSON at line N: …; then \
          :name is the file's name). Keys without a value are absent. Turned off by \
          mcp.claude-codex?.",
    make: |lua| {
        create_async_function(lua, |lua, dir: Value| async move {
            let dir: String = match from_lua(&lua, dir)? {
                Json::String(d) => d,
                other => {
                    return Err(lua_err(format!(
                        "mcp.found: DIR must be a string, not {other}"
                    )));
                }
            };
            let lisp = Lisp::from_lua(&lua).ok_or_else(|| lua_err("no Lisp host"))?;
            let mut all = declared(&lisp, &dir).await;
            let own: Vec<(String, String)> = all
                .iter()
                .filter(|f| f.why.is_none())
                .map(|f| (f.name.clone(), DECLARED.to_owned()))
                .collect();
            all.extend(found(&lisp, Path::new(&dir), &own));
            to_lua(&lua, &Json::Array(all.iter().map(found_json).collect()))
        })
    },
}];
