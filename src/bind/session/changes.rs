//! Checkpoints of what a command changed: `session.command-checkpoint-before` and
//! `session.command-checkpoint-after`, which the agent calls around `bash` in a git work tree,
//! and the `checkpoint.commands?` setting.
//!
//! Before the command, the paths `git status` reports are kept as they are (their content in the
//! store); after it, each path reported then or before whose content moved is recorded as a
//! change, its content before being the one kept, or `HEAD`'s for a path that was clean, or none
//! for a new untracked file (`crate::project::changes`). Ignored files, files outside the work
//! tree and a repository with too many changed paths are not covered; the docs say so. It knows
//! nothing of which commands call it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mlua::{Lua, UserData, Value};
use parking_lot::Mutex;

use super::rewind::{add_used, cap, stored, used};
use super::rt;
use crate::lisp::{HostFn, Lisp, LispError, SettingDecl, create_async_function, define};
use crate::project::changes;
use crate::session::checkpoint::{Checkpoint, CheckpointStore, Snapshot};

pub(super) fn install(lisp: &Lisp) -> Result<(), LispError> {
    lisp.declare_setting(&SettingDecl::new(
        "checkpoint.commands?",
        "boolean",
        false,
        "Whether /rewind covers what a `bash` command changes in a git work tree: `git status` runs (confined) before and after each command, and the files it reports as changed are checkpointed. Off by default: it costs each command about 5 ms and two more processes (scripts/bench.sh checkpoint); write and edit are always covered.",
    ))?;
    define(lisp.lua(), "session", CHANGES)?;
    Ok(())
}

/// What the work tree held before a command: the root and each reported path's snapshot.
struct Before {
    root: PathBuf,
    paths: HashMap<String, Snapshot>,
}

impl UserData for Before {}

/// Snapshots of `paths` (relative to `root`), each kept under the cap.
fn keep_all(
    cp: &CheckpointStore,
    root: &Path,
    paths: &[String],
    used: u64,
    cap: u64,
) -> (HashMap<String, Snapshot>, u64) {
    let mut added = 0u64;
    let mut out = HashMap::new();
    for p in paths {
        let abs = root.join(p);
        let len = std::fs::symlink_metadata(&abs).map_or(0, |m| m.len());
        let snap = cp
            .snapshot(&abs, true, used.saturating_add(added), cap)
            .unwrap_or(Snapshot::Other);
        if let Snapshot::File { kept: true, .. } = snap {
            added = added.saturating_add(len);
        }
        out.insert(p.clone(), snap);
    }
    (out, added)
}

async fn before(lua: Lua, id: Option<String>) -> mlua::Result<Value> {
    let enabled = Lisp::from_lua(&lua)
        .and_then(|l| l.setting::<bool>("checkpoint.commands?").ok())
        .unwrap_or(false);
    let cap = cap(&lua);
    let Ok((s, store, id)) = stored(&lua, id) else {
        return Ok(Value::Nil);
    };
    settle(&id).await;
    let cwd = s.with(&id, |s| s.cwd.clone()).unwrap_or_default();
    let Some(root) = changes::work_tree(&cwd).filter(|_| enabled && cap > 0) else {
        return Ok(Value::Nil);
    };
    let Some(paths) = changes::changed(&root, crate::bind::project::read_only()).await else {
        return Ok(Value::Nil);
    };
    let cp = store.checkpoints(&id);
    let used_now = used(&id, &cp);
    let r = root.clone();
    let (paths, added) =
        tokio::task::spawn_blocking(move || keep_all(&cp, &r, &paths, used_now, cap))
            .await
            .map_err(|e| rt(e.to_string()))?;
    add_used(&id, added);
    Ok(Value::UserData(
        lua.create_userdata(Before { root, paths })?,
    ))
}

/// Command checkpoints still being worked out, per session: the `git status` after a command
/// runs while the loop goes on, and whatever reads or changes files next waits for it
/// ([`settle`]).
static PENDING: Mutex<Option<HashMap<String, Vec<tokio::task::JoinHandle<()>>>>> = Mutex::new(None);

/// Wait until the command checkpoints of session `id` are recorded. The checkpoints of files,
/// the next command's, a rewind, a fork and the end of every prompt call it.
pub(crate) async fn settle(id: &str) {
    let handles = PENDING
        .lock()
        .as_mut()
        .and_then(|m| m.remove(id))
        .unwrap_or_default();
    for h in handles {
        let _ = h.await;
    }
}

/// What the work after a command needs, taken from Lisp before it goes on.
struct After {
    sessions: std::sync::Arc<crate::session::Sessions>,
    store: CheckpointStore,
    id: String,
    root: PathBuf,
    before: HashMap<String, Snapshot>,
    cap: u64,
    redactions: crate::session::Redactions,
}

async fn after(lua: Lua, (token, id): (Value, Option<String>)) -> mlua::Result<bool> {
    let Value::UserData(u) = token else {
        return Ok(false);
    };
    let Ok((sessions, store, id)) = stored(&lua, id) else {
        return Ok(false);
    };
    let (root, before) = {
        let b = u.borrow::<Before>()?;
        (b.root.clone(), b.paths.clone())
    };
    let work = After {
        sessions,
        store: store.checkpoints(&id),
        id: id.clone(),
        root,
        before,
        cap: cap(&lua),
        redactions: super::secrets::redactions(&lua),
    };
    let handle = tokio::spawn(record_changes(work));
    PENDING
        .lock()
        .get_or_insert_with(HashMap::new)
        .entry(id)
        .or_default()
        .push(handle);
    Ok(true)
}

/// `git status` after the command, the content at `HEAD` of each path that was clean before, and
/// a `checkpoint` entry for each path whose content moved.
async fn record_changes(mut w: After) {
    let Some(now) = changes::changed(&w.root, crate::bind::project::read_only()).await else {
        return;
    };
    // A path clean before and reported now: its content before is HEAD's, or none.
    let clean_before: Vec<String> = now
        .into_iter()
        .filter(|p| !w.before.contains_key(p))
        .collect();
    let mut heads =
        changes::at_head(&w.root, &clean_before, crate::bind::project::read_only()).await;
    for p in clean_before {
        let snap = match heads.remove(&p) {
            Some(bytes) => {
                let used = used(&w.id, &w.store);
                let snap = w.store.snapshot_bytes(&bytes, used, w.cap);
                let snap = snap.unwrap_or(Snapshot::Other);
                if let Snapshot::File { kept: true, .. } = snap {
                    add_used(&w.id, bytes.len() as u64);
                }
                snap
            }
            None => Snapshot::Missing,
        };
        w.before.insert(p, snap);
    }
    let (root, store, before) = (
        w.root.clone(),
        w.store.clone(),
        std::mem::take(&mut w.before),
    );
    let Ok(moved) = tokio::task::spawn_blocking(move || moved(&root, &store, before)).await else {
        return;
    };
    for c in &moved {
        w.sessions
            .with(&w.id, |s| s.record(&c.entry(), &w.redactions));
    }
}

/// The changes of the paths in `before` whose content is not what it was.
fn moved(
    root: &Path,
    store: &CheckpointStore,
    before: HashMap<String, Snapshot>,
) -> Vec<Checkpoint> {
    let mut names: Vec<&String> = before.keys().collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|p| {
            let abs = root.join(p);
            let was = &before[p];
            let is = store.snapshot(&abs, false, 0, 0).unwrap_or(Snapshot::Other);
            (was.digest() != is.digest() || *was == Snapshot::Other).then(|| Checkpoint {
                path: abs.display().to_string(),
                before: was.digest(),
                after: is.digest(),
                kept: was.kept(),
            })
        })
        .collect()
}

const CHANGES: &[HostFn] = &[
    HostFn {
        name: "command-checkpoint-before",
        args: "?session-id",
        doc: "Before a command runs in the session's git work tree: keep the files `git status` \
              reports now in the checkpoint store; returns the token for \
              `session.command-checkpoint-after`, or nil when nothing is tracked (not a work \
              tree, `checkpoint.commands?` off, git slow or missing, too many changed paths).",
        make: |lua| create_async_function(lua, before),
    },
    HostFn {
        name: "command-checkpoint-after",
        args: "token ?session-id",
        doc: "After the command: record each file of the work tree whose content it changed \
              (reported by `git status` before or after), with its content before, so \
              `session.rewind` can put it back. The work goes on in the background, started at \
              once; the next checkpoint, rewind or fork and the end of the prompt wait for it. \
              Returns whether it started; a nil TOKEN records nothing.",
        make: |lua| create_async_function(lua, after),
    },
];
