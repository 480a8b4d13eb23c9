//! The files part of `session.rewind`: every file checked first, then each put back, on the
//! disk or through `agent.write-restored` (which `oml acp` redefines to write through the
//! editor, `fs/write_text_file`, so its buffer follows).
//!
//! On the disk, a restored file is written as the tools write (`crate::tools::atomic`): no
//! symbolic link in its folders is followed. A file is offered to `agent.write-restored` only
//! while its path holds no link at all, as it did when oml changed it; one that became a link
//! since stays on the disk's path, where the link is not followed. A file the rewind removes (it
//! did not exist before) is removed on the disk: ACP has no way to delete a file. It knows
//! nothing of the commands that call it.

use std::path::{Path, PathBuf};

use mlua::Lua;

use super::rt;
use crate::lisp::{Lisp, LispError};
use crate::session::checkpoint::{Checkpoint, CheckpointStore, Snapshot};
use crate::session::history::Restore;

/// The hook `session.rewind` offers each file it puts back to, looked up at each call.
const WRITE_RESTORED: &str = "agent.write-restored";

/// What the files part of a rewind did, or would have done.
#[derive(Debug, Default)]
pub(super) struct FilesOutcome {
    pub(super) restored: Vec<String>,
    pub(super) removed: Vec<String>,
    /// Changed since by someone else (or now a link or a folder).
    pub(super) conflicts: Vec<String>,
    /// Their earlier content was not kept (over the cap, or not a regular file).
    pub(super) lost: Vec<String>,
    /// Could not be put back (a link among its folders, an I/O error, the editor's refusal):
    /// path and why.
    pub(super) failed: Vec<String>,
    /// Nothing was written: there were conflicts or lost contents and no `force`.
    pub(super) refused: bool,
    pub(super) checkpoints: Vec<Checkpoint>,
}

/// Why one file could not be put back; a rewind's `failed` entry says it after the path.
#[derive(Debug, thiserror::Error)]
enum PutBackError {
    /// Its earlier content could not be read from the checkpoint store.
    #[error(transparent)]
    Stored(std::io::Error),
    /// Writing or removing it on the disk failed.
    #[error(transparent)]
    Disk(#[from] crate::tools::ToolError),
    /// `agent.write-restored` raised this (the editor refused, say).
    #[error(transparent)]
    Hook(#[from] LispError),
    /// Handing its content to Lisp, or the task doing the I/O, failed.
    #[error(transparent)]
    Lisp(#[from] mlua::Error),
}

/// What the checkpoint store holds for the session: where to put the files back from, how
/// many bytes it uses and may use.
pub(super) struct Store {
    pub(super) cp: CheckpointStore,
    pub(super) used: u64,
    pub(super) cap: u64,
}

/// Put the files of `restores` back for session `id`, after checking them all: with a conflict
/// or a lost content and no `force`, nothing is written.
pub(super) async fn restore_files(
    lua: &Lua,
    id: &str,
    store: Store,
    restores: Vec<Restore>,
    force: bool,
) -> mlua::Result<FilesOutcome> {
    let Store { cp, mut used, cap } = store;
    let (c, r) = (cp.clone(), restores.clone());
    let mut out = blocking(move || check(&c, &r, force)).await?;
    if out.refused {
        return Ok(out);
    }
    for r in restores.into_iter().filter(|r| r.kept) {
        let (c, path, content) = (cp.clone(), PathBuf::from(&r.path), r.content.clone());
        let (before, len, bytes) = blocking(move || {
            // What the file is now, kept so that this rewind can be rewound in its turn.
            let before = c.snapshot(&path, true, used, cap)?;
            let len = std::fs::metadata(&path).map_or(0, |m| m.len());
            Ok((
                before,
                len,
                content.map(|d| c.get(&d).map_err(PutBackError::Stored)),
            ))
        })
        .await?;
        if let Snapshot::File { kept: true, .. } = before {
            used = used.saturating_add(len);
        }
        let done = match bytes {
            None => remove(&r.path).await.map(|()| &mut out.removed),
            Some(Err(why)) => Err(why),
            Some(Ok(bytes)) => write(lua, id, &r.path, bytes)
                .await
                .map(|()| &mut out.restored),
        };
        match done {
            Ok(list) => list.push(r.path.clone()),
            Err(why) => {
                out.failed.push(format!("{}: {why}", r.path));
                continue;
            }
        }
        out.checkpoints.push(Checkpoint {
            path: r.path.clone(),
            before: before.digest(),
            after: r.content.clone(),
            kept: before.kept(),
        });
    }
    Ok(out)
}

/// The conflicts and lost contents among `restores`; refused when there are any and no
/// `force`.
fn check(cp: &CheckpointStore, restores: &[Restore], force: bool) -> std::io::Result<FilesOutcome> {
    let mut out = FilesOutcome::default();
    for r in restores {
        if !r.kept {
            out.lost.push(r.path.clone());
            continue;
        }
        let now = cp.snapshot(Path::new(&r.path), false, 0, 0)?;
        if now == Snapshot::Other || now.digest() != r.expect {
            out.conflicts.push(r.path.clone());
        }
    }
    out.refused = !(force || out.conflicts.is_empty() && out.lost.is_empty());
    Ok(out)
}

/// Put `bytes` back at `path`: through `agent.write-restored` when it takes it, else on the
/// disk.
async fn write(lua: &Lua, id: &str, path: &str, bytes: Vec<u8>) -> Result<(), PutBackError> {
    if written_elsewhere(lua, id, path, &bytes).await? {
        return Ok(());
    }
    let path = PathBuf::from(path);
    Ok(blocking(move || Ok(crate::tools::atomic::write_atomic(&path, &[&bytes], true))).await??)
}

async fn remove(path: &str) -> Result<(), PutBackError> {
    let path = PathBuf::from(path);
    Ok(blocking(move || Ok(crate::tools::atomic::remove_file(&path))).await??)
}

/// `(agent.write-restored path content session-id)`, when it is defined and the path holds no
/// link: whether it wrote the file (true) or left it to the disk (nil or false). Its error is
/// why the file could not be put back.
async fn written_elsewhere(
    lua: &Lua,
    id: &str,
    path: &str,
    bytes: &[u8],
) -> Result<bool, PutBackError> {
    let hook = Lisp::from_lua(lua).and_then(|l| l.function(WRITE_RESTORED).ok().flatten());
    let Some(hook) = hook else {
        return Ok(false);
    };
    let p = Path::new(path);
    if crate::tools::path::real_path(p).ok().as_deref() != Some(p) {
        return Ok(false);
    }
    let content = lua.create_string(bytes)?;
    match hook.call_async::<mlua::Value>((path, content, id)).await {
        Ok(v) => Ok(!matches!(v, mlua::Value::Nil | mlua::Value::Boolean(false))),
        Err(e) => Err(LispError::from(e).into()),
    }
}

/// `f` on the blocking pool; its I/O error as a Lisp error.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> mlua::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| rt(e.to_string()))?
        .map_err(|e| rt(format!("session.rewind: {e}")))
}
