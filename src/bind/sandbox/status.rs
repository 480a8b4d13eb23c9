//! The sandbox's Lisp functions: `oml.own-folders`, `oml.denied-read?`,
//! `oml.network-held?` and `oml.sandbox-status`, which say what the sandbox of the settings as
//! they are now keeps from commands. They read the policy (`super::policy`) and its sources,
//! for the running coroutine's scope (`super::scope::current`: the lookup the layer that knows
//! sessions set); they change nothing.

use std::path::Path;

use mlua::{Lua, Table};

use super::{deny_read, policy, protected_dirs, root_of, scope, sources};
use crate::lisp::{HostFn, Lisp, LispError};
use crate::sandbox::{self, Mode};

pub(super) const SANDBOX: &[HostFn] = &[
    HostFn {
        name: "own-folders",
        args: "",
        doc: "oml's own folders (config, state, cache, runtime) and the user's agent folders \
              (~/.agents, ~/.claude, ~/.codex: skills, commands, hooks), as real paths: where \
              code and trust are loaded from. No confined command writes beneath them, and the \
              write and edit tools count a file there as outside the workspace; but for oml's \
              worktrees (`project.worktrees-folder`), where a session in one may write.",
        make: |lua| {
            lua.create_function(|_, ()| {
                let dirs: Vec<String> = protected_dirs(&[])
                    .iter()
                    .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()))
                    .map(|d| d.display().to_string())
                    .collect();
                Ok(dirs)
            })
        },
    },
    HostFn {
        name: "denied-read?",
        args: "path ?beneath",
        doc: "Whether PATH (relative to the session's directory; every link followed) lies in \
              one of the sandbox.deny-read paths, which no confined command may read; with \
              ?BENEATH true, also whether one of them lies beneath PATH (a folder a search \
              walks). The permission policy asks before oml's own read, ls, grep and find look \
              there, and never previews an edit of such a path.",
        make: |lua| lua.create_function(denied_read),
    },
    HostFn {
        name: "network-held?",
        args: "?dir",
        doc: "Whether commands run in ?DIR (default: the session's directory) have the network \
              held to named domains (sandbox.allowed-domains, sandbox.denied-domains, or Claude \
              Code's lists): they then reach the network only through oml's proxy, which only \
              commands oml starts itself can reach, so `bash` does not run them in the editor's \
              terminal.",
        make: |lua| lua.create_function(network_held),
    },
    HostFn {
        name: "sandbox-status",
        args: "?dir",
        doc: "What the command sandbox enforces for commands run in ?DIR (default: the session's \
          directory) on this kernel, from the sandbox.* settings as they are now: {:mode \
          :enforced :reason :abi :network? :network :writable :allowed-domains :denied-domains \
          :deny-read :from :skipped}. :enforced is :full, :partial (some of \
          the policy is not enforced here; :reason says what), :unavailable (commands are \
          refused; :reason says why) or :off; :abi is the kernel's Landlock ABI version (nil \
          without Landlock); :writable lists where :workspace-write commands may write; \
          :protected lists oml's own folders and the user's agent folders (~/.agents, \
          ~/.claude, ~/.codex), read-only even beneath them; :guarded the \
          project's .oml/ and .git (see sandbox.git-writable?), read-only with the view; \
          :read-only-view? \
          says whether commands get the read-only view of the rest of the file system (a \
          private mount namespace: chmod, chown, utimes and xattrs outside fail); :network \
          says what keeps commands off the network: :namespace (a network namespace of their \
          own: no protocol reaches anything), :seccomp (no namespace here: IPv4 and IPv6 \
          sockets are refused by the system-call filter), :proxy (the network is on but held \
          to sandbox.allowed-domains or sandbox.denied-domains: a namespace whose one way out \
          is oml's HTTP proxy), :unrestricted, or :open when sandbox.network? lets them on. \
          :allowed-domains and :denied-domains are the lists the network is held to (nil when \
          it is not), :from says where each came from (oml's setting, Claude Code's \
          ~/.claude/settings.json, narrowed by the project's .claude/settings.json); \
          :deny-read lists each unreadable path as {:path :from}; :skipped names settings \
          files that could not be read.",
        make: |lua| lua.create_function(sandbox_status),
    },
];

/// `oml.denied-read?`.
fn denied_read(lua: &Lua, (path, beneath): (String, Option<bool>)) -> mlua::Result<bool> {
    let lisp = Lisp::from_lua(lua).ok_or_else(|| mlua::Error::RuntimeError("no Lisp".into()))?;
    let here = scope::current(lua).dir;
    let Ok(path) = crate::tools::resolve_path(&here, &path) else {
        return Ok(false);
    };
    let real = std::fs::canonicalize(&path).unwrap_or(path);
    let denied = deny_read(&lisp, &here).map_err(|e| mlua::Error::RuntimeError(e.to_string()))?;
    let beneath = beneath.unwrap_or(false);
    // Only the denied paths that exist: one that does not holds nothing to read.
    Ok(denied
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .any(|d| real.starts_with(&d) || (beneath && d.starts_with(&real))))
}

/// The running coroutine's scope, for commands run in `dir` (relative to its directory) when
/// one is asked about.
fn asked_scope(lua: &Lua, dir: Option<String>) -> scope::Scope {
    let scope = scope::current(lua);
    match dir {
        Some(d) => {
            let dir = scope.dir.join(d);
            scope.in_dir(dir)
        }
        None => scope,
    }
}

/// `oml.network-held?`.
fn network_held(lua: &Lua, dir: Option<String>) -> mlua::Result<bool> {
    let lisp = Lisp::from_lua(lua).ok_or_else(|| mlua::Error::RuntimeError("no Lisp".into()))?;
    let scope = asked_scope(lua, dir);
    let policy = policy(&lisp, &scope).map_err(|e| mlua::Error::RuntimeError(e.to_string()))?;
    Ok(sandbox::network_layer(&policy) == sandbox::NetworkLayer::Proxy)
}

/// `oml.sandbox-status`.
fn sandbox_status(lua: &Lua, dir: Option<String>) -> mlua::Result<Table> {
    let rt = |e: LispError| mlua::Error::RuntimeError(e.to_string());
    let lisp = Lisp::from_lua(lua).ok_or_else(|| mlua::Error::RuntimeError("no Lisp".into()))?;
    let scope = asked_scope(lua, dir);
    let policy = policy(&lisp, &scope).map_err(rt)?;
    let status = sandbox::status(&policy);
    let t = lua.create_table()?;
    t.set("mode", policy.mode.name())?;
    t.set("enforced", status.name())?;
    t.set("reason", status.reason())?;
    t.set("abi", sandbox::landlock::probe().ok())?;
    t.set("network?", policy.network)?;
    t.set("network", sandbox::network_layer(&policy).name())?;
    let writable: Vec<String> = match policy.mode {
        Mode::WorkspaceWrite => sandbox::effective(&policy)
            .writable
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        Mode::ReadOnly | Mode::Off => Vec::new(),
    };
    t.set("writable", writable)?;
    let protected: Vec<String> = policy
        .protected
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    t.set("protected", protected)?;
    let guarded: Vec<String> = policy
        .guarded
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    t.set("guarded", guarded)?;
    let view = policy.mode != Mode::Off && sandbox::mounts::available().is_ok();
    t.set("read-only-view?", view)?;
    sources_status(lua, &lisp, &scope.dir, &t)?;
    Ok(t)
}

/// The lists of [`sources`] in the status, each with where it came from: `:allowed-domains`
/// (nil when the network is not held), `:denied-domains`, `:deny-read` (a list of
/// `{:path :from}`), `:from {:allowed-domains :denied-domains}` and `:skipped` (settings files
/// that could not be read).
fn sources_status(lua: &Lua, lisp: &Lisp, dir: &Path, t: &Table) -> mlua::Result<()> {
    let lists = sources::lists(lisp, dir, &root_of(dir))
        .map_err(|e| mlua::Error::RuntimeError(e.to_string()))?;
    let from = lua.create_table()?;
    if let Some(domains) = &lists.domains {
        t.set("allowed-domains", domains.allowed.clone())?;
        t.set("denied-domains", domains.denied.clone())?;
        from.set("allowed-domains", domains.allowed_from.as_str())?;
        from.set("denied-domains", domains.denied_from.as_str())?;
    }
    t.set("from", from)?;
    let deny = lua.create_table()?;
    for (path, source) in &lists.deny_read {
        let entry = lua.create_table()?;
        entry.set("path", path.display().to_string())?;
        entry.set("from", source.as_str())?;
        deny.push(entry)?;
    }
    t.set("deny-read", deny)?;
    t.set("skipped", lists.skipped)?;
    Ok(())
}
