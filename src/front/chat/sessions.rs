//! Which session the chat opens (new, the latest of this directory, a named one, or one picked
//! from a list), how each of its sessions is set up (model, permission mode), and the names the
//! line editor completes.
//!
//! Sessions are the agent's ordinary stored sessions: a chat is one `oml acp` can load.

use std::io::{BufRead as _, Write as _};
use std::path::Path;

use mlua::{Table, Value};

use super::ChatOptions;
use super::term::Caps;
use crate::agent::{Agent, AgentEvent};
use crate::front::stdio::out;
use crate::session::store::{SessionSummary, Store};

/// How many recent sessions `--resume` offers.
pub const RESUME_CHOICES: usize = 10;

/// Which session the chat opens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Start {
    /// A new one.
    #[default]
    New,
    /// The latest stored conversation of this directory (`-c`), else a new session.
    Continue,
    /// One picked from the recent sessions of this directory (`--resume`).
    Pick,
    /// The stored session with this id (`--session ID`).
    Id(String),
}

/// The session opened.
pub struct Opened {
    pub id: String,
    /// It was stored before (its conversation goes on).
    pub resumed: bool,
}

/// Open the session `options.start` names, its events going to `sink`.
pub async fn open(
    agent: &Agent,
    options: &ChatOptions,
    caps: Caps,
    sink: tokio::sync::mpsc::UnboundedSender<AgentEvent>,
) -> Result<Opened, String> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let store = options.store.as_ref();
    let existing = match (&options.start, store) {
        (Start::New, _) => None,
        (_, None) => return Err("sessions are not stored (--no-session)".into()),
        (Start::Continue, Some(store)) => conversations(store, &cwd).first().map(|s| s.id.clone()),
        (Start::Id(id), Some(store)) => {
            if !store.exists(id) {
                return Err(format!("no stored session {id}"));
            }
            Some(id.clone())
        }
        (Start::Pick, Some(store)) => {
            let list = conversations(store, &cwd);
            if list.is_empty() {
                return Err("no stored sessions in this directory to resume".into());
            }
            if !caps.interactive {
                return Err("--resume asks which session on a terminal; give --session ID".into());
            }
            Some(pick(&list)?)
        }
    };
    let opened = match existing {
        Some(id) => {
            agent
                .sessions()
                .load(&id, Some(sink))
                .map_err(|e| format!("cannot load session {id}: {e}"))?;
            agent.sessions().with(&id, |s| s.cwd = cwd.clone());
            Opened { id, resumed: true }
        }
        None => Opened {
            id: agent
                .try_new_session(cwd, Some(sink))
                .map_err(|e| e.to_string())?,
            resumed: false,
        },
    };
    configure(agent, &opened.id, options);
    Ok(opened)
}

/// The stored sessions of `cwd` that hold a conversation (a user message), latest first. An
/// empty one (a chat opened and closed, an editor's `session/new`) is not one to go on with,
/// and must not hide the conversation before it from `-c`.
fn conversations(store: &Store, cwd: &Path) -> Vec<SessionSummary> {
    let mut list = store.list(Some(cwd));
    list.retain(|s| s.title.is_some());
    list
}

/// Give session `id` the model and permission mode of the command line, when given.
pub fn configure(agent: &Agent, id: &str, options: &ChatOptions) {
    agent.sessions().with(id, |s| {
        if let Some(mode) = &options.mode {
            s.data
                .insert("permission-mode".into(), serde_json::json!(mode));
        }
        if let Some(model) = &options.model {
            s.data.insert("model".into(), serde_json::json!(model));
        }
    });
}

/// Ask on the terminal which of the recent sessions to resume.
fn pick(list: &[SessionSummary]) -> Result<String, String> {
    out!("Recent sessions of this directory:");
    for (i, s) in list.iter().take(RESUME_CHOICES).enumerate() {
        out!(
            "{:>3}  {}  {}",
            i + 1,
            s.updated_at,
            super::surface::clean(s.title.as_deref().unwrap_or("(untitled)"))
        );
    }
    let shown = list.len().min(RESUME_CHOICES);
    let _ = write!(std::io::stdout(), "Resume which (1-{shown}, Enter: 1)? ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| format!("cannot read the answer: {e}"))?;
    let choice = line.trim();
    let n: usize = if choice.is_empty() {
        1
    } else {
        choice
            .parse()
            .map_err(|_| format!("{choice:?} is not one of 1-{shown}"))?
    };
    list.get(n.wrapping_sub(1))
        .filter(|_| (1..=shown).contains(&n))
        .map(|s| s.id.clone())
        .ok_or_else(|| format!("{n} is not one of 1-{shown}"))
}

/// The slash command names and the global Lisp names (with the fields of namespace tables),
/// at most `max` Lisp names, sorted.
pub fn completion_names(agent: &Agent, max: usize) -> (Vec<String>, Vec<String>) {
    let lisp = agent.lisp();
    let mut commands = Vec::new();
    if let Ok(Some(f)) = lisp.function("agent.commands")
        && let Ok(list) = f.call::<Table>(())
    {
        for entry in list.sequence_values::<Table>().flatten() {
            if let Ok(name) = entry.get::<String>("name") {
                commands.push(name);
            }
        }
    }
    commands.sort();
    let mut names = Vec::new();
    for (key, value) in lisp.lua().globals().pairs::<Value, Value>().flatten() {
        let Value::String(key) = key else { continue };
        let key = key.to_string_lossy();
        if key.starts_with('_') {
            continue;
        }
        if let Value::Table(t) = value
            && key != "package"
        {
            for (field, _) in t.pairs::<Value, Value>().flatten() {
                if let Value::String(field) = field {
                    names.push(format!("{key}.{}", field.to_string_lossy()));
                }
            }
        }
        names.push(key);
        if names.len() >= max {
            break;
        }
    }
    names.sort();
    names.truncate(max);
    (commands, names)
}
