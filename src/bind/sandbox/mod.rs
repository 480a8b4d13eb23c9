//! The `sandbox.*` settings: the Lisp face of `crate::sandbox`, and the one place that turns
//! the settings into the sandbox a command runs in ([`prepare`]), for the `bash` tool and
//! `oml.run-process`. Its Lisp functions (`oml.sandbox-status` and the like) are in
//! `status.rs`; where its lists come from, in `sources.rs`; what it takes from a session (its
//! directory, other roots, network switch), as a [`Scope`] given by the caller, in `scope.rs`.
//!
//! The workspace a command may write in is the project root of its directory
//! (`crate::project::find_root`: the nearest folder with `.git` or `.oml/`), else the directory
//! itself; the system temp dir and `sandbox.writable` are added. Secrets are the variables
//! `crate::sandbox::env` picks, plus every variable whose value is `llm.api-key`'s.
//!
//! This module does not decide whether a command may run; it only says, as an error text, that
//! the sandbox cannot be set up here (the permission policy may turn that into a question). It
//! knows nothing of sessions: what it needs of one comes in a [`Scope`].

use std::path::{Path, PathBuf};

use mlua::Lua;
use serde_json::{Value as Json, json};

mod scope;
mod sources;
mod status;

pub use scope::{Scope, ScopeLookup, set_scope_lookup};

use crate::lisp::{Lisp, LispError, SettingDecl, define};
use crate::sandbox::{self, Mode, Policy, Prepared, Secrets, Status};

/// What the tool result says when the sandbox is unavailable, after the reason.
pub const TURN_OFF_HINT: &str = "set sandbox.mode to :off to run unconfined";

/// Declare the `sandbox.*` settings and define `oml.sandbox-status`.
pub fn install(lisp: &Lisp) -> Result<(), LispError> {
    for decl in settings() {
        lisp.declare_setting(&decl)?;
    }
    define(lisp.lua(), "oml", status::SANDBOX)?;
    Ok(())
}

fn settings() -> Vec<SettingDecl> {
    let modes = json!([
        Mode::WorkspaceWrite.name(),
        Mode::ReadOnly.name(),
        Mode::Off.name()
    ]);
    vec![
        SettingDecl::new(
            "sandbox.mode",
            modes,
            json!(Mode::WorkspaceWrite.name()),
            "How `bash` and `oml.run-process` commands are confined (Linux Landlock): :workspace-write (read everywhere, write only in the project, the temp dir and sandbox.writable), :read-only (write nowhere) or :off (not confined). Every mode runs commands in a session of their own, with no terminal, killed when oml ends.",
        ),
        SettingDecl::new(
            "sandbox.network?",
            "boolean",
            json!(false),
            "Whether confined commands may use the network. Off (the default), each command gets a network namespace of its own where user namespaces allow: no route anywhere, whatever the protocol (UDP, TCP, ICMP), and none of the host's abstract Unix sockets; Landlock also refuses TCP bind and connect (Linux 6.7). Where no namespace can be made, IPv4 and IPv6 sockets are refused by the system-call filter instead; oml.sandbox-status's :network says which holds.",
        ),
        SettingDecl::new(
            "sandbox.allowed-domains",
            "table?",
            Json::Null,
            "With sandbox.network? on, the only hosts confined commands may reach, e.g. [\"pypi.org\" \"*.npmjs.org\"] (an exact name or address, or *. and a name for the names beneath it). Commands then get a network namespace whose one way out is oml's HTTP proxy (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY point at it): it lets through the listed hosts, judged by name before any lookup, and answers 403 naming the host to anything else; the tool result says what was refused. nil (the default) leaves the network open, or takes Claude Code's sandbox.network.allowedDomains from ~/.claude/settings.json; a project's .claude/settings.json may only narrow it. Where no network namespace can be made, commands get no network at all.",
        ),
        SettingDecl::new(
            "sandbox.denied-domains",
            "table?",
            Json::Null,
            "With sandbox.network? on, hosts confined commands may never reach, in the form of sandbox.allowed-domains; it beats that list, and alone holds the network to every host but these (through the proxy). nil (the default) takes Claude Code's sandbox.network.deniedDomains from ~/.claude/settings.json; a project's .claude/settings.json may add to it.",
        ),
        SettingDecl::new(
            "sandbox.writable",
            "table",
            json!([]),
            "More folders (or files) where :workspace-write commands may write, besides the project root and the temp dir, e.g. [\"~/.cache\"]; relative paths are relative to the session's directory. oml's own folders (config, state, cache, runtime) stay read-only beneath them (see oml.sandbox-status).",
        ),
        SettingDecl::new(
            "sandbox.deny-read",
            "table",
            json!(default_deny_read()),
            "Paths no confined command may read or list (~ is the home folder): each is covered in the command's view by an empty read-only folder or file, so a read finds nothing. The default lists ssh, cloud, container, package-registry and VCS credentials, GPG and password stores, browser profiles, keyrings, oml's own session transcripts, checkpoints and trust records, and Claude Code's and Codex's transcripts and credentials. Add with (setq sandbox.deny-read (doto sandbox.deny-read (table.insert \"~/secrets\"))); remove one by leaving it out. A workspace inside one of them is refused, with the reason; without the mount layer they stay readable and oml.sandbox-status says so.",
        ),
        SettingDecl::new(
            "sandbox.git-writable?",
            "boolean",
            json!(false),
            "Whether confined commands may write in the project's .git (commit, branch, fetch). Off by default, as in Codex: a command that can write .git can plant hooks or a core.fsmonitor in its config that your own git runs later, outside any sandbox. The project's .oml/ stays read-only either way.",
        ),
        SettingDecl::new(
            "sandbox.keep-env",
            "table",
            json!([]),
            "Environment variables passed to commands even though their names look secret (contain KEY, TOKEN, SECRET or PASSWORD), e.g. [\"SSH_KEY_PATH\"].",
        ),
        SettingDecl::new(
            "sandbox.drop-env",
            "table",
            json!([]),
            "More environment variables removed from commands' environment, besides those whose names look secret and the one holding llm.api-key, e.g. [\"DATABASE_URL\"].",
        ),
    ]
}

/// The secrets commands may not read by default (`sandbox.deny-read`): credentials of ssh, the
/// clouds, containers, package registries and git hosts; GPG and password stores; browser
/// profiles and keyrings; oml's own transcripts, checkpoints, trust records, `oml ask` records
/// and input histories; Claude Code's, Codex's and Gemini CLI's transcripts, histories and
/// credentials; cargo's, Vault's and PostgreSQL's credentials.
pub fn default_deny_read() -> Vec<String> {
    let mut paths: Vec<String> = DENY_READ_HOME.iter().map(|p| format!("~/{p}")).collect();
    let own = crate::paths::Paths::from_env();
    for path in [
        own.sessions_dir(),
        own.state.join("checkpoints"),
        own.trust_file(),
        own.state.join("ask"),
        own.history_file(),
        own.chat_history_file(),
    ] {
        paths.push(path.display().to_string());
    }
    paths
}

/// [`default_deny_read`]'s paths beneath the home folder.
const DENY_READ_HOME: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".gnupg",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".config/gh",
    ".password-store",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".local/share/keyrings",
    ".local/share/kwalletd",
    ".claude/projects",
    ".claude/todos",
    ".claude/shell-snapshots",
    ".claude/history.jsonl",
    ".claude/.credentials.json",
    ".codex/sessions",
    ".codex/archived_sessions",
    ".codex/history.jsonl",
    ".codex/auth.json",
    ".claude.json",
    ".gemini/oauth_creds.json",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".vault-token",
    ".pgpass",
];

/// The paths no command run in `dir` may read (`sandbox.deny-read` and Claude Code's
/// `denyRead`, [`sources`]), each made absolute; one that cannot be resolved (no home folder)
/// is left out.
fn deny_read(lisp: &Lisp, dir: &Path) -> Result<Vec<PathBuf>, LispError> {
    let lists = sources::lists(lisp, dir, &root_of(dir))?;
    Ok(lists.deny_read.into_iter().map(|(path, _)| path).collect())
}

/// The policy for a command of `scope` (run in its directory), from the settings as they are
/// now and the scope's other workspace roots and network switch.
pub fn policy(lisp: &Lisp, scope: &Scope) -> Result<Policy, LispError> {
    let dir = scope.dir.as_path();
    let mode = narrowed(mode_setting(lisp)?, scope.mode);
    let mut writable = vec![root_of(dir), std::env::temp_dir()];
    for path in strings(lisp, "sandbox.writable")? {
        let resolved = crate::tools::resolve_path(dir, &path)
            .map_err(|e| LispError::Setting(format!("sandbox.writable: {e}")))?;
        writable.push(resolved);
    }
    // The session's other workspace roots (ACP `additionalDirectories`) are workspaces too:
    // writable, with their own `.oml/` and `.git` guarded.
    writable.extend(scope.more_roots.iter().cloned());
    let roots: Vec<PathBuf> = std::iter::once(root_of(dir))
        .chain(scope.more_roots.iter().cloned())
        .collect();
    let guarded = guarded_in(lisp, &roots)?;
    let protected = protected_dirs(held_by(mode, &writable));
    let lists = sources::lists(lisp, dir, &root_of(dir))?;
    Ok(Policy {
        mode,
        writable,
        network: match scope.network {
            Some(own) => own,
            None => lisp.setting("sandbox.network?")?,
        },
        protected,
        guarded,
        deny_read: lists.deny_read.into_iter().map(|(path, _)| path).collect(),
        domains: lists.domains,
    })
}

/// The policy for commands an agent asks oml's client to run (`terminal/*`): exactly the
/// session's folders `roots` (and the temp dir) writable, never their enclosing project; their
/// `.git` and `.oml` read-only; the network as `sandbox.network?` says. Never unconfined: with
/// `sandbox.mode` off, a sub-agent's commands still get `workspace-write`.
pub(crate) fn roots_policy(lisp: &Lisp, roots: &[PathBuf]) -> Result<Policy, LispError> {
    let mode = match mode_setting(lisp)? {
        Mode::Off => Mode::WorkspaceWrite,
        m => m,
    };
    let guarded = guarded_in(lisp, roots)?;
    let mut writable = roots.to_vec();
    writable.push(std::env::temp_dir());
    let protected = protected_dirs(held_by(mode, &writable));
    let lists = match roots.first() {
        Some(root) => sources::lists(lisp, root, root)?,
        None => sources::Lists::default(),
    };
    Ok(Policy {
        mode,
        writable,
        network: lisp.setting("sandbox.network?")?,
        protected,
        guarded,
        deny_read: lists.deny_read.into_iter().map(|(path, _)| path).collect(),
        domains: lists.domains,
    })
}

/// `setting`, or the session's own mode `own` when that confines more: read-only, then
/// workspace-write, then off.
fn narrowed(setting: Mode, own: Option<Mode>) -> Mode {
    let rank = |m: Mode| match m {
        Mode::ReadOnly => 0,
        Mode::WorkspaceWrite => 1,
        Mode::Off => 2,
    };
    match own {
        Some(own) if rank(own) < rank(setting) => own,
        _ => setting,
    }
}

/// `sandbox.mode`, read.
fn mode_setting(lisp: &Lisp) -> Result<Mode, LispError> {
    let mode: String = lisp.setting("sandbox.mode")?;
    Mode::from_name(&mode)
        .ok_or_else(|| LispError::Setting(format!("sandbox.mode: unknown mode {mode}")))
}

/// The [`PROJECT_CODE`] paths that exist in the workspace `roots`, kept read-only (`.git` not
/// when `sandbox.git-writable?`).
fn guarded_in(lisp: &Lisp, roots: &[PathBuf]) -> Result<Vec<PathBuf>, LispError> {
    let git_writable: bool = lisp.setting("sandbox.git-writable?")?;
    Ok(roots
        .iter()
        .flat_map(|root| {
            PROJECT_CODE
                .iter()
                .filter(|name| !(git_writable && **name == ".git"))
                .map(move |name| root.join(name))
        })
        .filter(|p| p.exists())
        .collect())
}

/// What in a project oml or git loads code or trust from, kept read-only for commands even
/// inside the workspace: `.oml/` (the project's init file and modules, run once trusted) and
/// `.git` (its hooks, its config — whose `core.fsmonitor`, `core.hooksPath` and filters name
/// programs git runs for the user, outside any sandbox — and the files that point git at
/// another config, `commondir` and `config.worktree`, which a command could create; as a mount
/// point `.git` cannot be renamed or replaced either). `sandbox.git-writable?` lifts it for
/// `.git`.
pub const PROJECT_CODE: &[&str] = &[".oml", ".git"];

/// The workspace of a command run in `dir`: its project root, else `dir`.
fn root_of(dir: &Path) -> std::path::PathBuf {
    crate::project::find_root(dir).unwrap_or_else(|| dir.to_path_buf())
}

/// The paths a command of `mode` may write beneath: `writable` under `:workspace-write`, none
/// otherwise.
fn held_by(mode: Mode, writable: &[PathBuf]) -> &[PathBuf] {
    match mode {
        Mode::WorkspaceWrite => writable,
        Mode::ReadOnly | Mode::Off => &[],
    }
}

/// What no confined command may write: oml's own folders ([`crate::paths::Paths::own_dirs`]),
/// made now when missing, and the user's agent folders ([`crate::paths::agent_dirs`]: skills
/// with their `skill.fnl`, commands, hooks), made now when missing where one of `writable`
/// holds them (a session in the home folder) — either way so that a command cannot make one
/// first, out of the read-only view's reach, and plant code in it.
fn protected_dirs(writable: &[PathBuf]) -> Vec<PathBuf> {
    let paths = crate::paths::Paths::from_env();
    let mut dirs: Vec<PathBuf> = paths
        .own_dirs()
        .into_iter()
        .inspect(|dir| {
            let _ = crate::paths::ensure_private_dir(dir);
        })
        .map(Path::to_path_buf)
        .collect();
    let writable: Vec<PathBuf> = writable
        .iter()
        .filter_map(|w| std::fs::canonicalize(w).ok())
        .collect();
    for dir in crate::paths::agent_dirs() {
        let missing = std::fs::symlink_metadata(&dir).is_err();
        let held = || {
            let parent = dir.parent().and_then(|p| std::fs::canonicalize(p).ok());
            parent.is_some_and(|p| writable.iter().any(|w| p.starts_with(w)))
        };
        if missing && held() {
            let _ = crate::paths::ensure_private_dir(&dir);
        }
        dirs.push(dir);
    }
    dirs
}

/// The secrets to remove, from the settings as they are now.
pub fn secrets(lisp: &Lisp) -> Result<Secrets, LispError> {
    let key: Option<String> = lisp.setting("llm.api-key")?;
    let mut also = vec![crate::llm::config::ENV_API_KEY.to_owned()];
    if let Some(key) = key.filter(|k| !k.is_empty()) {
        let same = std::env::vars_os().filter(|(_, v)| v.as_encoded_bytes() == key.as_bytes());
        also.extend(same.map(|(name, _)| name.to_string_lossy().into_owned()));
    }
    // The key's own variable holds the key too: name it once.
    also.sort();
    also.dedup();
    Ok(Secrets {
        also,
        keep: strings(lisp, "sandbox.keep-env")?,
        drop: strings(lisp, "sandbox.drop-env")?,
    })
}

/// The sandbox for a command of `scope` run by the running Lisp, with the secrets scrubbed;
/// `Err` is the text a tool result gives when the sandbox cannot be set up here (or a setting
/// is wrong).
pub(crate) fn prepare(lua: &Lua, scope: &Scope) -> Result<Prepared, String> {
    let lisp = Lisp::from_lua(lua).ok_or("the Lisp host is gone")?;
    let policy = policy(&lisp, scope).map_err(|e| e.to_string())?;
    let secrets = secrets(&lisp).map_err(|e| e.to_string())?;
    let prepared = sandbox::prepare(&policy);
    if let Status::Unavailable(reason) = prepared.status() {
        let refusal = sandbox::SandboxError::Unavailable(reason.clone());
        return Err(format!("{refusal}; {TURN_OFF_HINT}"));
    }
    Ok(prepared.scrub_env(&secrets))
}

/// How an ACP client's terminal runs one command through oml's launcher.
pub(crate) struct Launcher {
    /// oml's own program, by its absolute path.
    pub program: String,
    /// `sandbox-exec -- bash -c <command>`: what the editor's terminal title shows.
    pub args: Vec<String>,
    /// The variable that carries the sandbox's flags ([`sandbox::LAUNCHER_POLICY_ENV`]) and its
    /// value.
    pub env: (String, String),
}

/// How to run `bash -c command` in the directory of `scope` under the sandbox of the
/// settings as they are now, through the launcher `oml sandbox-exec` (for a process that oml
/// does not start itself: an ACP client's terminal). `Err` as for [`prepare`]: the sandbox
/// cannot be set up here, or a setting is wrong.
pub(crate) fn launcher(lua: &Lua, scope: &Scope, command: &str) -> Result<Launcher, String> {
    let lisp = Lisp::from_lua(lua).ok_or("the Lisp host is gone")?;
    let policy = policy(&lisp, scope).map_err(|e| e.to_string())?;
    let secrets = secrets(&lisp).map_err(|e| e.to_string())?;
    if let Status::Unavailable(reason) = sandbox::status(&policy) {
        let refusal = sandbox::SandboxError::Unavailable(reason);
        return Err(format!("{refusal}; {TURN_OFF_HINT}"));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find oml's own program: {e}"))?;
    let mut flags = vec!["--mode".to_owned(), policy.mode.name().to_owned()];
    if policy.mode == Mode::WorkspaceWrite {
        let lists = [
            ("--writable", &policy.writable),
            ("--protect", &policy.protected),
            ("--guard", &policy.guarded),
        ];
        for (flag, paths) in lists {
            for path in paths {
                flags.extend([flag.to_owned(), path.display().to_string()]);
            }
        }
    }
    if policy.mode != Mode::Off {
        for path in &policy.deny_read {
            flags.extend(["--deny-read".to_owned(), path.display().to_string()]);
        }
    }
    // The domain proxy lives in this process, out of the launcher's reach: a command held to
    // domains runs there with no network at all.
    if policy.open() {
        flags.push("--network".to_owned());
    }
    let lists = [
        ("--secret", &secrets.also),
        ("--keep-env", &secrets.keep),
        ("--drop-env", &secrets.drop),
    ];
    for (flag, names) in lists {
        for name in names {
            flags.extend([flag.to_owned(), name.clone()]);
        }
    }
    let args = ["sandbox-exec", "--", "bash", "-c", command].map(str::to_owned);
    Ok(Launcher {
        program: exe.display().to_string(),
        args: args.to_vec(),
        env: (
            sandbox::LAUNCHER_POLICY_ENV.to_owned(),
            serde_json::to_string(&flags).map_err(|e| e.to_string())?,
        ),
    })
}

/// A list-of-strings setting (an empty table counts as an empty list).
fn strings(lisp: &Lisp, name: &str) -> Result<Vec<String>, LispError> {
    let wrong = || LispError::Setting(format!("{name} expects a list of strings"));
    match lisp.setting::<Json>(name)? {
        Json::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Json::String(s) => Ok(s),
                _ => Err(wrong()),
            })
            .collect(),
        Json::Object(map) if map.is_empty() => Ok(Vec::new()),
        _ => Err(wrong()),
    }
}
