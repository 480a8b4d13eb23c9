//! The `session` functions behind checkpoints, rewinds and forks: `session.mark-prompt!`,
//! `session.checkpoint-before` and `session.checkpoint-after` (which the agent calls around a
//! file-changing tool), `session.prompts`, `session.rewind` and `session.fork`, and the
//! `checkpoint.max-bytes` setting.
//!
//! What a rewind reads is the session file (`crate::session::history`), flushed first, so it
//! works the same after a crash and a load; the contents it puts back come from the session's
//! checkpoint store (`crate::session::checkpoint`), put back by `restore` (on the disk with no
//! symbolic link followed, so a link a command planted since cannot turn a rewind into a write
//! elsewhere, or through the editor). A rewind of the conversation takes the session's plan back
//! too. It knows nothing of the commands that call it.

use std::collections::HashMap;
use std::path::PathBuf;

use mlua::{Lua, Table, Value};
use parking_lot::Mutex;

use super::restore::{self, FilesOutcome};
use super::{rt, secrets, session_id, sessions};
use crate::lisp::{HostFn, Lisp, LispError, SettingDecl, create_async_function, define, to_lua};
use crate::session::checkpoint::{Checkpoint, CheckpointStore, Snapshot};
use crate::session::history::{self, Rewind};
use crate::session::{Entry, Sessions, store::Store};

/// The session data key of the plan (`agent.plan`), which a rewind of the conversation takes
/// back.
const PLAN_KEY: &str = "plan";

/// The default of `checkpoint.max-bytes`: 256 MiB of earlier contents per session.
pub const CHECKPOINT_MAX_BYTES: i64 = 256 * 1024 * 1024;

pub(super) fn install(lisp: &Lisp) -> Result<(), LispError> {
    lisp.declare_setting(&SettingDecl::new(
        "checkpoint.max-bytes",
        "integer",
        CHECKPOINT_MAX_BYTES,
        "Bytes of earlier file contents one session keeps for /rewind (its checkpoint store under the state folder). A change past the cap is still recorded, but /rewind cannot put that file back; 0 keeps none.",
    ))?;
    define(lisp.lua(), "session", REWIND)?;
    Ok(())
}

/// Bytes each session's store holds, counted once per process and then kept up to date, so a
/// checkpoint does not list the store.
static USED: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);

pub(super) fn used(id: &str, store: &CheckpointStore) -> u64 {
    let mut map = USED.lock();
    *map.get_or_insert_with(HashMap::new)
        .entry(id.to_owned())
        .or_insert_with(|| store.size())
}

pub(super) fn add_used(id: &str, bytes: u64) {
    if let Some(n) = USED.lock().as_mut().and_then(|m| m.get_mut(id)) {
        *n = n.saturating_add(bytes);
    }
}

pub(super) fn cap(lua: &Lua) -> u64 {
    Lisp::from_lua(lua)
        .and_then(|l| l.setting::<i64>("checkpoint.max-bytes").ok())
        .map_or(0, |n| n.max(0) as u64)
}

/// The store of the sessions and the session's id.
pub(super) fn stored(
    lua: &Lua,
    id: Option<String>,
) -> mlua::Result<(std::sync::Arc<Sessions>, Store, String)> {
    let s = sessions(lua)?;
    let id = session_id(lua, &s, id)?;
    let store = s
        .store()
        .ok_or_else(|| rt("sessions are not stored here (--no-session): nothing to rewind"))?;
    Ok((s, store, id))
}

/// Record `entry` in session `id`'s file.
pub(super) fn record(lua: &Lua, s: &Sessions, id: &str, entry: &Entry) {
    let redactions = secrets::redactions(lua);
    s.with(id, |s| s.record(entry, &redactions));
}

/// The session's entries as its file holds them, after everything queued is written.
async fn entries(s: &Sessions, store: &Store, id: &str) -> mlua::Result<Vec<Entry>> {
    super::changes::settle(id).await;
    s.flush(id).await;
    let store = store.clone();
    let id = id.to_owned();
    let loaded = tokio::task::spawn_blocking(move || store.load(&id))
        .await
        .map_err(|e| rt(e.to_string()))?;
    Ok(loaded
        .map_err(|e| rt(format!("cannot read the session: {e}")))?
        .entries)
}

/// What a rewind asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Both,
    Files,
    Conversation,
}

impl Scope {
    fn parse(s: Option<&str>) -> mlua::Result<Scope> {
        match s.unwrap_or("both") {
            "both" | "" => Ok(Scope::Both),
            "files" | "code" => Ok(Scope::Files),
            "conversation" => Ok(Scope::Conversation),
            other => Err(rt(format!(
                "session.rewind: scope {other:?} is none of both, files, conversation"
            ))),
        }
    }
    fn files(self) -> bool {
        self != Scope::Conversation
    }
    fn conversation(self) -> bool {
        self != Scope::Files
    }
}

fn strings(lua: &Lua, items: &[String]) -> mlua::Result<Table> {
    lua.create_sequence_from(items.iter().map(String::as_str))
}

/// `session.rewind`: see its doc.
async fn rewind(
    lua: Lua,
    (n, scope, force, id): (i64, Option<String>, Option<bool>, Option<String>),
) -> mlua::Result<Table> {
    let scope = Scope::parse(scope.as_deref())?;
    let (s, store, id) = stored(&lua, id)?;
    let entries = entries(&s, &store, &id).await?;
    let prompts = history::prompts(&entries);
    let Some(prompt) = usize::try_from(n)
        .ok()
        .filter(|n| (1..=prompts.len()).contains(n))
        .map(|n| prompts[n - 1].clone())
    else {
        return Err(rt(format!(
            "session.rewind: no prompt {n} (this session has {})",
            prompts.len()
        )));
    };
    let out = lua.create_table()?;
    out.set("prompt", n)?;
    out.set("text", prompt.text.as_str())?;
    let mut files = FilesOutcome::default();
    if scope.files() {
        let restores = history::restores(&entries, prompt.index);
        let cp = store.checkpoints(&id);
        let (used, cap) = (used(&id, &cp), cap(&lua));
        let store = restore::Store { cp, used, cap };
        files = restore::restore_files(&lua, &id, store, restores, force.unwrap_or(false)).await?;
    }
    for (key, list) in [
        ("restored", &files.restored),
        ("removed", &files.removed),
        ("conflicts", &files.conflicts),
        ("lost", &files.lost),
        ("failed", &files.failed),
    ] {
        out.set(key, strings(&lua, list)?)?;
    }
    out.set("refused", files.refused)?;
    if files.refused {
        return Ok(out);
    }
    for c in &files.checkpoints {
        record(&lua, &s, &id, &c.entry());
    }
    let entry = Rewind {
        prompt: prompt_number(n),
        conversation: scope.conversation(),
        files: scope.files(),
    };
    record(&lua, &s, &id, &entry.entry());
    if scope.conversation() {
        let messages = history::transcript_until(&entries, prompt.index);
        out.set("messages", messages.len())?;
        let entry = Entry::Transcript { messages };
        record(&lua, &s, &id, &entry);
        if let Entry::Transcript { messages } = entry {
            s.with(&id, |s| {
                s.transcript = messages.into_iter().map(std::sync::Arc::new).collect();
            });
        }
        if let Some(plan) = rewind_plan(&lua, &s, &id, &entries, prompt.index) {
            out.set("plan", to_lua(&lua, &plan)?)?;
        }
    }
    s.flush(&id).await;
    Ok(out)
}

/// The plan goes back with the conversation: the session's plan becomes the one it had
/// before the entry `end` (recorded, so a load replays it), returned when it changed (an empty
/// list when there was none).
fn rewind_plan(
    lua: &Lua,
    s: &Sessions,
    id: &str,
    entries: &[Entry],
    end: usize,
) -> Option<serde_json::Value> {
    let then = history::data_until(entries, end, PLAN_KEY);
    let redactions = secrets::redactions(lua);
    let changed = s.with(id, |s| {
        let now = s.data.get(PLAN_KEY).unwrap_or(&serde_json::Value::Null);
        let changed = *now != then;
        if changed {
            super::put(s, PLAN_KEY.to_owned(), then.clone(), &redactions);
        }
        changed
    });
    changed
        .unwrap_or(false)
        .then(|| then.as_array().map_or_else(Vec::new, Clone::clone).into())
}

fn prompt_number(n: i64) -> usize {
    usize::try_from(n).unwrap_or(0)
}

/// `session.prompts`: see its doc.
async fn prompts(lua: Lua, id: Option<String>) -> mlua::Result<Table> {
    let (s, store, id) = stored(&lua, id)?;
    let entries = entries(&s, &store, &id).await?;
    let prompts = history::prompts(&entries);
    let out = lua.create_table()?;
    for (i, p) in prompts.iter().enumerate() {
        let end = prompts.get(i + 1).map_or(entries.len(), |q| q.index);
        let t = lua.create_table()?;
        t.set("n", i + 1)?;
        t.set("text", p.text.as_str())?;
        t.set("files", history::files_changed(&entries, p.index, end))?;
        out.push(t)?;
    }
    Ok(out)
}

/// `session.fork`: see its doc.
async fn fork(lua: Lua, (n, id): (Option<i64>, Option<String>)) -> mlua::Result<String> {
    let (s, store, parent) = stored(&lua, id)?;
    let entries = entries(&s, &store, &parent).await?;
    let prompts = history::prompts(&entries);
    let end = match n {
        None => None,
        Some(n) => Some(
            usize::try_from(n)
                .ok()
                .filter(|n| (1..=prompts.len()).contains(n))
                .map(|n| prompts[n - 1].index)
                .ok_or_else(|| {
                    rt(format!(
                        "session.fork: no prompt {n} (this session has {})",
                        prompts.len()
                    ))
                })?,
        ),
    };
    let child = crate::session::store::new_id();
    let (st, from, to) = (store.clone(), parent.clone(), child.clone());
    let prompt = n.map(prompt_number);
    tokio::task::spawn_blocking(move || crate::session::fork::fork(&st, &from, &to, end, prompt))
        .await
        .map_err(|e| rt(e.to_string()))?
        .map_err(|e| rt(format!("session.fork: {e}")))?;
    let data = serde_json::json!({"id": child, "prompt": prompt});
    let entry = Entry::Custom {
        kind: "fork".into(),
        data,
    };
    record(&lua, &s, &parent, &entry);
    Ok(child)
}

/// `session.checkpoint-before`: see its doc.
async fn checkpoint_before(lua: Lua, (path, id): (String, Option<String>)) -> mlua::Result<Value> {
    let Ok((_, store, id)) = stored(&lua, id) else {
        return Ok(Value::Nil);
    };
    let cap = cap(&lua);
    if cap == 0 {
        return Ok(Value::Nil);
    }
    super::changes::settle(&id).await;
    let cp = store.checkpoints(&id);
    let used = used(&id, &cp);
    let p = PathBuf::from(&path);
    let snap = tokio::task::spawn_blocking(move || {
        let len = std::fs::symlink_metadata(&p).map_or(0, |m| m.len());
        cp.snapshot(&p, true, used, cap).map(|s| (s, len))
    })
    .await
    .map_err(|e| rt(e.to_string()))?;
    let Ok((snap, len)) = snap else {
        return Ok(Value::Nil); // unreadable: the tool will say why
    };
    if let Snapshot::File { kept: true, .. } = snap {
        add_used(&id, len);
    }
    let t = lua.create_table()?;
    t.set("path", path)?;
    t.set("before", snap.digest())?;
    t.set("kept", snap.kept())?;
    Ok(Value::Table(t))
}

/// `session.checkpoint-after`: see its doc.
async fn checkpoint_after(lua: Lua, (token, id): (Value, Option<String>)) -> mlua::Result<bool> {
    let Value::Table(token) = token else {
        return Ok(false);
    };
    let Ok((s, store, id)) = stored(&lua, id) else {
        return Ok(false);
    };
    let path: String = token.get("path")?;
    let before: Option<String> = token.get("before")?;
    let kept: bool = token.get::<Option<bool>>("kept")?.unwrap_or(false);
    let cp = store.checkpoints(&id);
    let p = PathBuf::from(&path);
    let after = tokio::task::spawn_blocking(move || cp.snapshot(&p, false, 0, 0))
        .await
        .map_err(|e| rt(e.to_string()))?
        .map_err(|e| rt(format!("session.checkpoint-after: {e}")))?;
    if after.digest() == before && after != Snapshot::Other {
        return Ok(false);
    }
    let change = Checkpoint {
        path,
        before,
        after: after.digest(),
        kept,
    };
    record(&lua, &s, &id, &change.entry());
    Ok(true)
}

const REWIND: &[HostFn] = &[
    HostFn {
        name: "mark-prompt!",
        args: "text ?session-id",
        doc: "Record in the session's file that a user prompt whose text is TEXT starts here: the \
              points `session.rewind` and `session.fork` count (the start of the text is kept \
              for their lists). `agent.prompt` calls it before it appends the prompt. Returns nil.",
        make: |lua| {
            lua.create_function(|lua, (text, id): (String, Option<String>)| {
                let s = sessions(lua)?;
                let id = session_id(lua, &s, id)?;
                record(lua, &s, &id, &history::prompt_entry(&text));
                Ok(())
            })
        },
    },
    HostFn {
        name: "checkpoint-before",
        args: "path ?session-id",
        doc: "Keep what the file PATH (absolute) holds now in the session's checkpoint store, \
              before a tool changes it; returns the token to give `session.checkpoint-after` \
              once the change is made, or nil when nothing is kept (sessions not stored, \
              `checkpoint.max-bytes` 0, the file unreadable).",
        make: |lua| create_async_function(lua, checkpoint_before),
    },
    HostFn {
        name: "checkpoint-after",
        args: "token ?session-id",
        doc: "After the change `session.checkpoint-before` gave TOKEN for: record it in the \
              session's file when the file changed (the content before, the digest after), so \
              `session.rewind` can put it back. Returns whether a change was recorded; a nil \
              TOKEN records nothing.",
        make: |lua| create_async_function(lua, checkpoint_after),
    },
    HostFn {
        name: "prompts",
        args: "?session-id",
        doc: "The user prompts of the session's history as it stands (a rewind of the \
              conversation drops those from its point on): a list of {:n :text :files}, N \
              counting from 1, TEXT the start of the prompt, FILES how many files oml changed \
              from it to the next.",
        make: |lua| create_async_function(lua, prompts),
    },
    HostFn {
        name: "rewind",
        args: "n ?scope ?force ?session-id",
        doc: "Take the session back to just before its prompt N (see `session.prompts`). SCOPE \
              is \"both\" (the default), \"files\" (only the files oml changed since, put back \
              from the checkpoints) or \"conversation\" (only the transcript). A file changed \
              since by someone else, or whose earlier content was not kept, stops the whole \
              rewind (nothing is changed; :refused is true) unless FORCE. A file that cannot be \
              written back (a symbolic link among its folders, which is never followed) is \
              left alone and named in :failed. Each file put back is first offered to \
              `agent.write-restored` (`oml acp` writes it through the editor); a file created \
              since is removed from the disk. A rewind of the conversation takes the plan \
              (`agent.plan`) back to what it was before prompt N. Returns {:prompt :text \
              :restored :removed :conflicts :lost :failed :refused :messages :plan}, :plan the \
              plan of then when the rewind changed it; the session's file records the rewind, \
              so a load replays the history as it is after it.",
        make: |lua| create_async_function(lua, rewind),
    },
    HostFn {
        name: "fork",
        args: "?n ?session-id",
        doc: "Start a new stored session from this one: its history before prompt N (all of it \
              when N is nil), its checkpoints too. Both go on independently; the new one names \
              its parent (`oml sessions` shows the tree). Returns the new session's id; it is \
              not opened.",
        make: |lua| create_async_function(lua, fork),
    },
];
