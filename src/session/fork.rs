//! Forks: a new session file that starts with another session's history (all of it, or what
//! came before one of its prompts) and goes on independently, and the tree the forks make.
//!
//! The fork's file is a new header naming its parent and the fork point, then the parent's
//! entry lines copied byte for byte (their `at` times too), so its replay, its prompts and its
//! checkpoints are the parent's up to the point; the parent's checkpoint objects are adopted
//! into the fork's own store. It knows nothing of Lisp or of open sessions: the caller flushes
//! an open parent first.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Write as _};

use super::entry::{Entry, Header};
use super::store::{SessionSummary, Store, make_title, now, valid_id};

/// Fork the stored session `parent` into the new session `id`, with the parent's entries
/// before entry number `end` (all when `None`); `prompt` is the parent's prompt number the
/// fork point is before, recorded in the header. The file is written whole and synced before
/// this returns.
pub fn fork(
    store: &Store,
    parent: &str,
    id: &str,
    end: Option<usize>,
    prompt: Option<usize>,
) -> std::io::Result<()> {
    if !valid_id(id) || !store.exists(parent) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no session {parent}"),
        ));
    }
    let file = std::fs::File::open(store.path(parent))?;
    let mut lines = BufReader::new(file).split(b'\n');
    let mut header = None;
    let mut body = Vec::new();
    let mut entries = 0usize;
    for line in lines.by_ref() {
        let line = line?;
        let Some(entry) = Entry::parse(&line) else {
            continue;
        };
        match entry {
            Entry::Session(h) if header.is_none() => header = Some(h),
            _ if header.is_none() => break,
            _ => {
                if end.is_some_and(|end| entries >= end) {
                    break;
                }
                entries += 1;
                body.extend_from_slice(&line);
                body.push(b'\n');
            }
        }
    }
    let parent_header = header.ok_or_else(|| std::io::Error::other("no session header"))?;
    let header = Entry::Session(Header {
        id: id.to_owned(),
        cwd: parent_header.cwd,
        created: now(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        parent: Some(parent.to_owned()),
        fork_prompt: prompt,
        title: Some(fork_title(store.title(parent).as_deref(), parent)),
    });
    let mut out = serde_json::to_vec(&header)?;
    out.push(b'\n');
    out.extend_from_slice(&body);
    crate::paths::ensure_private_dir(store.dir())?;
    store.checkpoints(id).adopt(&store.checkpoints(parent))?;
    let mut file = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(store.path(id))?;
    file.write_all(&out)?;
    file.sync_all()
}

/// A fork's title, so that a session list tells it from its parent: the parent's title with
/// " (fork)", or "Fork of ID" when the parent has none; cut as every title is.
pub fn fork_title(parent_title: Option<&str>, parent: &str) -> String {
    make_title(&match parent_title {
        Some(t) => format!("{t} (fork)"),
        None => format!("Fork of {parent}"),
    })
}

/// The sessions of `list` as a tree: each with its depth, a fork right under its parent (the
/// latest first among siblings, as `list` orders them); a fork whose parent is not listed is a
/// root.
pub fn tree(list: &[SessionSummary]) -> Vec<(usize, &SessionSummary)> {
    let listed: HashMap<&str, usize> = list
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (i, s) in list.iter().enumerate() {
        match s.parent.as_deref().and_then(|p| listed.get(p)) {
            Some(&p) if p != i => children.entry(p).or_default().push(i),
            _ => roots.push(i),
        }
    }
    let mut out = Vec::with_capacity(list.len());
    let mut stack: Vec<(usize, usize)> = roots.into_iter().rev().map(|i| (0, i)).collect();
    while let Some((depth, i)) = stack.pop() {
        if out.len() > list.len() {
            break; // a cycle of parents (hand-edited files): never loop
        }
        out.push((depth, &list[i]));
        for &c in children.get(&i).into_iter().flatten().rev() {
            stack.push((depth + 1, c));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_fork_copies_the_history_before_its_point_and_the_objects() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::new(dir.path().join("sessions"));
        let log = store.create("p1", dir.path()).expect("create");
        let entries = [
            crate::session::history::prompt_entry("one"),
            Entry::Message {
                message: json!({"role": "user", "content": "one"}),
            },
            crate::session::history::prompt_entry("two"),
        ];
        for e in &entries {
            log.append(e);
        }
        log.flush_blocking();
        drop(log);
        let old = dir.path().join("old");
        std::fs::write(&old, "old").expect("write");
        let snap = store.checkpoints("p1").snapshot(&old, true, 0, 100);
        let d = snap.ok().and_then(|s| s.digest()).expect("kept");
        fork(&store, "p1", "f1", Some(2), Some(2)).expect("fork");
        let loaded = store.load("f1").expect("load");
        assert_eq!(loaded.entries, entries[..2]);
        assert_eq!(loaded.header.parent.as_deref(), Some("p1"));
        assert_eq!(loaded.header.fork_prompt, Some(2));
        assert_eq!(store.checkpoints("f1").get(&d).ok(), Some(b"old".to_vec()));
        fork(&store, "p1", "f2", None, None).expect("fork all");
        assert_eq!(store.load("f2").expect("load").entries, entries);
        assert!(
            fork(&store, "p1", "f1", None, None).is_err(),
            "ids are not reused"
        );
        assert!(fork(&store, "nope", "f3", None, None).is_err());
        let list = store.list(None);
        let shape: Vec<(usize, &str)> = tree(&list)
            .iter()
            .map(|(d, s)| (*d, s.id.as_str()))
            .collect();
        assert_eq!(shape.len(), 3);
        assert_eq!(shape[0], (0, "p1"));
        assert!(shape[1..].iter().all(|(d, _)| *d == 1));
    }
}
