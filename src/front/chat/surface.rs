//! The terminal chat's Lisp surface (`chat.*`): the host functions `chat.fnl` builds its cards,
//! status line and permission question from, and the [`Hub`] through which they reach the chat
//! front end (`crate::front::chat`), which owns the terminal.
//!
//! Loaded only by the chat (like `acp.*` only by `oml acp`), before the init files, so that an
//! init file can redefine every `chat.*` function. This module knows nothing of terminals: it
//! passes questions and session requests to whoever holds the hub's other end.

use crate::bind::rt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use mlua::{Lua, Value};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use crate::lisp::{HostFn, Lisp, LispError, create_async_function, define};
use crate::session::store::Store;

/// The most lines `chat.diff-lines` returns; the rest is summed up in one last line.
pub const DIFF_MAX_LINES: usize = 400;

/// A one-key question for the person at the terminal.
pub struct Ask {
    /// What to show, as `chat.permission-question` made it.
    pub question: String,
    /// The keys that answer it; Enter gives the first.
    pub keys: String,
    /// The key pressed, or `None` when the question was cancelled (Ctrl-C, Esc, no terminal).
    pub reply: oneshot::Sender<Option<char>>,
}

/// What a command asked the chat to do once the current input is handled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Start a fresh session (`/new`).
    NewSession,
    /// Go on with the stored session of this id (`/resume ID`).
    Resume(String),
}

/// Shared between the `chat.*` host functions and the chat front end.
#[derive(Default)]
pub struct Hub {
    asks: Mutex<Option<mpsc::UnboundedSender<Ask>>>,
    requests: Mutex<Vec<Request>>,
    color: AtomicBool,
    width: AtomicUsize,
    store: Mutex<Option<Store>>,
}

impl Hub {
    /// Where questions go from now on.
    pub fn set_asks(&self, asks: mpsc::UnboundedSender<Ask>) {
        *lock(&self.asks) = Some(asks);
    }

    /// Whether `chat.color?` says yes.
    pub fn set_color(&self, color: bool) {
        self.color.store(color, Ordering::Relaxed);
    }

    /// The terminal's width in columns, as `chat.width` reports it.
    pub fn set_width(&self, columns: usize) {
        self.width.store(columns, Ordering::Relaxed);
    }

    /// The session store `chat.stored-sessions` lists.
    pub fn set_store(&self, store: Option<Store>) {
        *lock(&self.store) = store;
    }

    /// The requests made since the last call, oldest first.
    pub fn take_requests(&self) -> Vec<Request> {
        std::mem::take(&mut *lock(&self.requests))
    }
}

fn lock<T>(m: &Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    m.lock()
}

static CHAT_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_chat.luac"));
const CHAT_FILE: &str = "src/front/chat/chat.fnl";

/// Install `chat.*` (the host functions, then `chat.fnl`, which also redefines
/// `agent.ask-permission` and adds `/new`, `/sessions` and `/resume`) into a host where the
/// agent is installed. Call it before the init files run.
pub fn install(lisp: &Lisp) -> Result<Arc<Hub>, LispError> {
    let hub = Arc::new(Hub::default());
    lisp.lua().set_app_data(hub.clone());
    define(lisp.lua(), "chat", CHAT)?;
    lisp.lua()
        .load(CHAT_BYTECODE)
        .set_name(format!("@{CHAT_FILE}"))
        .set_mode(mlua::chunk::ChunkMode::Binary)
        .exec()?;
    lisp.register_source(CHAT_FILE, include_str!("chat.fnl"));
    Ok(hub)
}

fn hub(lua: &Lua) -> mlua::Result<Arc<Hub>> {
    lua.app_data_ref::<Arc<Hub>>()
        .map(|h| Arc::clone(&h))
        .ok_or_else(|| rt("The chat is not running"))
}

const CHAT: &[HostFn] = &[
    HostFn {
        name: "ask-key!",
        args: "question keys",
        doc: "Show QUESTION to the person at the terminal and wait for one of the KEYS (a \
              string of characters; Enter answers the first). Returns the key as a string, \
              nil when the question was cancelled (Ctrl-C, Esc), or false when nobody can be \
              asked (stdin is not a terminal). Suspends only this coroutine.",
        make: |lua| create_async_function(lua, ask_key),
    },
    HostFn {
        name: "color?",
        args: "",
        doc: "Whether the chat draws in colour: stdout is a terminal, NO_COLOR is not set and \
              TERM is not dumb.",
        make: |lua| lua.create_function(|lua, ()| Ok(hub(lua)?.color.load(Ordering::Relaxed))),
    },
    HostFn {
        name: "width",
        args: "",
        doc: "The terminal's width in columns (80 when it is not a terminal).",
        make: |lua| {
            lua.create_function(|lua, ()| Ok(hub(lua)?.width.load(Ordering::Relaxed).max(20)))
        },
    },
    HostFn {
        name: "diff-lines",
        args: "old new ?context",
        doc: "The unified diff of the texts OLD and NEW (nil counts as empty) as a list of \
              lines, each starting with \"@@\", \"+\", \"-\" or \" \", with ?CONTEXT lines \
              (default 2) around each change; at most 400 lines, then one line saying how \
              many more.",
        make: |lua| lua.create_function(diff_lines),
    },
    HostFn {
        name: "clean",
        args: "text",
        doc: "TEXT with what could drive the terminal taken out: escape sequences and control               characters other than newline (a tab becomes spaces), so that a tool's output or               a file name never moves the cursor or changes colours.",
        make: |lua| {
            lua.create_function(|_, text: mlua::LuaString| Ok(clean(&text.to_string_lossy())))
        },
    },
    HostFn {
        name: "request!",
        args: "what ?id",
        doc: "Ask the chat to act once the current input is handled: WHAT is :new (a fresh \
              session) or :resume (the stored session ?ID). Returns true.",
        make: |lua| lua.create_function(request),
    },
    HostFn {
        name: "stored-sessions",
        args: "?all",
        doc: "The stored sessions of the chat's directory (every directory with ?ALL), latest \
              first, as a list of {:id :title :updated :cwd} (no :title: nothing was said in \
              it); empty when sessions are not stored.",
        make: |lua| lua.create_function(stored_sessions),
    },
];

/// How many spaces a tab becomes in [`clean`] text.
pub const TAB_SPACES: usize = 4;

/// `text` without escape sequences or control characters other than `\n` (tabs become
/// [`TAB_SPACES`] spaces): what the chat shows of text it did not write itself
/// ([`crate::printable`]).
pub fn clean(text: &str) -> String {
    let text = crate::printable::printable(text);
    if text.contains('\t') {
        text.replace('\t', &" ".repeat(TAB_SPACES))
    } else {
        text.into_owned()
    }
}

/// What `chat.ask-key!` answers: the key, nothing (cancelled), or that nobody can be asked.
enum Answer {
    Key(String),
    Cancelled,
    Nobody,
}

impl mlua::IntoLua for Answer {
    fn into_lua(self, lua: &Lua) -> mlua::Result<Value> {
        match self {
            Answer::Key(k) => k.into_lua(lua),
            Answer::Cancelled => Ok(Value::Nil),
            Answer::Nobody => Ok(Value::Boolean(false)),
        }
    }
}

fn ask_key(
    lua: Lua,
    (question, keys): (String, String),
) -> impl Future<Output = mlua::Result<Answer>> {
    let asks = hub(&lua).map(|h| lock(&h.asks).clone());
    async move {
        let Some(asks) = asks? else {
            return Ok(Answer::Nobody);
        };
        let (reply, answer) = oneshot::channel();
        if asks
            .send(Ask {
                question,
                keys,
                reply,
            })
            .is_err()
        {
            return Ok(Answer::Nobody);
        }
        Ok(match answer.await.ok().flatten() {
            Some(key) => Answer::Key(key.into()),
            None => Answer::Cancelled,
        })
    }
}

fn diff_lines(
    _: &Lua,
    (old, new, context): (Option<String>, Option<String>, Option<usize>),
) -> mlua::Result<Vec<String>> {
    let old = old.unwrap_or_default();
    let new = new.unwrap_or_default();
    let diff = similar::TextDiff::from_lines(&old, &new);
    let text = diff
        .unified_diff()
        .context_radius(context.unwrap_or(2))
        .to_string();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if lines.len() > DIFF_MAX_LINES {
        let more = lines.len() - DIFF_MAX_LINES;
        lines.truncate(DIFF_MAX_LINES);
        lines.push(format!("… {more} more diff lines"));
    }
    Ok(lines)
}

fn request(lua: &Lua, (what, id): (String, Option<String>)) -> mlua::Result<bool> {
    let request = match (what.as_str(), id) {
        ("new", _) => Request::NewSession,
        ("resume", Some(id)) => Request::Resume(id),
        ("resume", None) => return Err(rt("chat.request! :resume needs a session id")),
        (other, _) => return Err(rt(format!("chat.request!: unknown request {other}"))),
    };
    lock(&hub(lua)?.requests).push(request);
    Ok(true)
}

fn stored_sessions(lua: &Lua, all: Option<bool>) -> mlua::Result<Value> {
    let store = lock(&hub(lua)?.store).clone();
    let cwd = std::env::current_dir().ok();
    let list = match &store {
        Some(store) => store.list(if all == Some(true) {
            None
        } else {
            cwd.as_deref()
        }),
        None => Vec::new(),
    };
    let rows: Vec<serde_json::Value> = list
        .iter()
        .map(|s| {
            let mut row = serde_json::json!({"id": s.id, "updated": s.updated_at,
                                             "cwd": s.cwd.display().to_string()});
            // Absent rather than null (json.null is truthy in Lisp): an empty session.
            if let Some(title) = &s.title {
                row["title"] = serde_json::json!(title);
            }
            row
        })
        .collect();
    crate::lisp::to_lua(lua, &serde_json::Value::Array(rows))
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn clean_text_cannot_drive_the_terminal() {
        let cases = [
            ("plain\ntext", "plain\ntext"),
            ("\x1b[31mred\x1b[0m", "red"),
            ("a\x1b]0;title\x07b", "ab"),
            ("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),
            ("bell\x07 back\x08 cr\r", "bell back cr"),
            ("tab\there", "tab    here"),
            ("c1\u{9b}2J", "c12J"),
            ("\x1b[2J\x1b[Hwiped", "wiped"),
        ];
        for (input, want) in cases {
            assert_eq!(clean(input), want, "{input:?}");
        }
    }
}
