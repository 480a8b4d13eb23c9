//! Where the sandbox's lists come from, and the rule that joins them: oml's own settings
//! (`sandbox.allowed-domains`, `sandbox.denied-domains`, `sandbox.deny-read`), else the
//! `sandbox` block of Claude Code's user settings (`~/.claude/settings.json`, or
//! `$CLAUDE_CONFIG_DIR/settings.json`: `network.allowedDomains`, `network.deniedDomains`,
//! `filesystem.denyRead`), then the same block of the project's `.claude/settings.json` and
//! `.claude/settings.local.json`, which may only narrow: their denied domains and unreadable
//! paths are added, and their allowed domains are kept only where the user's own list already
//! lets the host through (with no list of the user's, they become the list). Nothing a
//! repository holds widens what a command may do, and the network switch itself is oml's alone.
//!
//! Each list carries its source, for `oml.sandbox-status` and the proxy's refusals. A settings
//! file that cannot be read as JSON is skipped and named in the status. This module reads
//! files and settings; it knows nothing of how the lists are enforced.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::lisp::{Lisp, LispError};
use crate::sandbox::domains::{Domains, Verdict, inward_literal};

/// The largest settings file read; a larger one is skipped (and named in the status).
const MAX_SETTINGS_BYTES: u64 = 1024 * 1024;

/// The setting names, as sources.
const ALLOWED_SETTING: &str = "sandbox.allowed-domains";
const DENIED_SETTING: &str = "sandbox.denied-domains";
pub(super) const DENY_READ_SETTING: &str = "sandbox.deny-read";

/// The lists for commands run in one directory, with where each came from.
#[derive(Debug, Default)]
pub(super) struct Lists {
    /// `None` when the network is not held to domains.
    pub domains: Option<Domains>,
    /// Each unreadable path with its source.
    pub deny_read: Vec<(PathBuf, String)>,
    /// Settings files skipped, with why.
    pub skipped: Vec<String>,
}

/// The `sandbox` block of a Claude Code settings file, as far as oml reads it.
#[derive(Debug, Default, Deserialize)]
struct SettingsFile {
    #[serde(default)]
    sandbox: Option<Block>,
}

#[derive(Debug, Default, Deserialize)]
struct Block {
    #[serde(default)]
    network: Option<Network>,
    #[serde(default)]
    filesystem: Option<Filesystem>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Network {
    allowed_domains: Option<Vec<String>>,
    denied_domains: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Filesystem {
    deny_read: Option<Vec<String>>,
}

/// One file's block, with the name it is shown by.
struct Found {
    shown: String,
    block: Block,
}

/// The lists for commands run in `dir` (whose project root is `root`).
pub(super) fn lists(lisp: &Lisp, dir: &Path, root: &Path) -> Result<Lists, LispError> {
    let mut lists = Lists::default();
    let user = user_file().and_then(|(path, shown)| read(&path, &shown, &mut lists));
    // A user settings file that exists but cannot be read may hold lists: the network is then
    // held closed (an empty allowed list) rather than left open.
    let unreadable = lists.skipped.first().cloned();
    let project: Vec<Found> = ["settings.json", "settings.local.json"]
        .iter()
        .filter_map(|name| {
            let shown = format!(".claude/{name}");
            read(&root.join(".claude").join(name), &shown, &mut lists)
        })
        .collect();
    lists.domains = domains(lisp, user.as_ref(), &project, &mut lists.skipped)?;
    if let Some(why) = unreadable {
        hold_closed(lisp, &mut lists.domains, why)?;
    }
    lists.deny_read = deny_read(lisp, dir, user.as_ref(), &project, &mut lists.skipped)?;
    Ok(lists)
}

fn network(f: &Found) -> Option<&Network> {
    f.block.network.as_ref()
}

/// The domain lists: oml's settings, else the user's Claude Code settings ([`own_lists`]);
/// then narrowed by the project's ([`narrow_by_project`]).
fn domains(
    lisp: &Lisp,
    user: Option<&Found>,
    project: &[Found],
    skipped: &mut Vec<String>,
) -> Result<Option<Domains>, LispError> {
    let mut domains = own_lists(lisp, user)?;
    for f in project {
        narrow_by_project(&mut domains, f, skipped);
    }
    if domains.allowed.is_none() && domains.denied.is_empty() {
        return Ok(None);
    }
    if domains.allowed_from.is_empty() {
        domains.allowed_from = ALLOWED_SETTING.into();
    }
    if domains.denied_from.is_empty() {
        domains.denied_from = DENIED_SETTING.into();
    }
    if let Some(bad) = domains.invalid() {
        return Err(LispError::Setting(format!(
            "{} / {}: {bad:?} is not a host name, an IP address or *.name",
            domains.allowed_from, domains.denied_from
        )));
    }
    Ok(Some(domains))
}

/// The user's own lists: each of oml's settings when set, else Claude Code's user settings.
fn own_lists(lisp: &Lisp, user: Option<&Found>) -> Result<Domains, LispError> {
    let mut domains = Domains::default();
    match optional_strings(lisp, ALLOWED_SETTING)? {
        Some(list) => {
            (domains.allowed, domains.allowed_from) = (Some(list), ALLOWED_SETTING.into())
        }
        None => {
            if let Some((f, list)) =
                user.and_then(|f| Some((f, network(f)?.allowed_domains.clone()?)))
            {
                domains.allowed = Some(list);
                domains.allowed_from = format!("{} sandbox.network.allowedDomains", f.shown);
            }
        }
    }
    match optional_strings(lisp, DENIED_SETTING)? {
        Some(list) => (domains.denied, domains.denied_from) = (list, DENIED_SETTING.into()),
        None => {
            if let Some((f, list)) =
                user.and_then(|f| Some((f, network(f)?.denied_domains.clone()?)))
            {
                domains.denied = list;
                domains.denied_from = format!("{} sandbox.network.deniedDomains", f.shown);
            }
        }
    }
    Ok(domains)
}

/// The project's file `f` narrows `domains`: its denied patterns added, its allowed ones kept
/// where the lists let them through ([`narrowed`]). A pattern that is not one is left out and
/// named in `skipped`, not made an error that stops every command.
fn narrow_by_project(domains: &mut Domains, f: &Found, skipped: &mut Vec<String>) {
    let Some(net) = network(f) else { return };
    let mut valid = |list: &[String]| -> Vec<String> {
        let (good, bad): (Vec<&String>, Vec<&String>) =
            list.iter().partition(|p| crate::sandbox::domains::valid(p));
        for p in bad {
            skipped.push(format!("{}: {p:?} is not a host pattern", f.shown));
        }
        good.into_iter().cloned().collect()
    };
    if let Some(denied) = &net.denied_domains {
        let denied = valid(denied);
        domains.denied.extend(denied);
        let from = format!("{} sandbox.network.deniedDomains", f.shown);
        domains.denied_from = joined(&domains.denied_from, &from);
    }
    if let Some(allowed) = &net.allowed_domains {
        let narrowed = narrowed(domains, &valid(allowed));
        domains.allowed = Some(narrowed);
        let from = format!("{} sandbox.network.allowedDomains", f.shown);
        domains.allowed_from = joined(&domains.allowed_from, &from);
    }
}

/// The project's `allowed` patterns that the current lists let through: a name the current
/// lists pass (one that reaches this machine, `localhost` or a loopback address, only when
/// they already name it so), a wildcard when the same wildcard is listed or its parent lies
/// beneath a listed one. With no current list, the project's as they are, less any that would
/// reach this machine.
fn narrowed(current: &Domains, allowed: &[String]) -> Vec<String> {
    let passes = |host: &str| current.verdict(host) == Verdict::Allowed;
    let mine = current.allowed.as_deref().unwrap_or_default();
    allowed
        .iter()
        .filter(|pattern| match pattern.strip_prefix("*.") {
            Some(parent) => {
                current.allowed.is_none()
                    || mine.iter().any(|m| m.eq_ignore_ascii_case(pattern))
                    || mine
                        .iter()
                        .any(|m| m.strip_prefix("*.").is_some_and(|p| under(parent, p)))
            }
            None => {
                passes(pattern) && (!inward_literal(pattern) || current.reaches_inward(pattern))
            }
        })
        .cloned()
        .collect()
}

/// Whether `name` lies strictly beneath `parent` (`a.b.org` beneath `b.org`).
fn under(name: &str, parent: &str) -> bool {
    let (name, parent) = (name.to_ascii_lowercase(), parent.to_ascii_lowercase());
    name.len() > parent.len() + 1 && name.ends_with(&format!(".{parent}"))
}

/// `sandbox.deny-read` (oml's defaults unless the user changed it) and every `denyRead` of the
/// Claude Code settings, each path made absolute (`~/` the home folder, `//` a root path, a
/// relative path against `dir`).
fn deny_read(
    lisp: &Lisp,
    dir: &Path,
    user: Option<&Found>,
    project: &[Found],
    skipped: &mut Vec<String>,
) -> Result<Vec<(PathBuf, String)>, LispError> {
    let mut out: Vec<(PathBuf, String)> = super::strings(lisp, DENY_READ_SETTING)?
        .iter()
        .filter_map(|p| crate::tools::resolve_path(dir, p).ok())
        .map(|p| (p, DENY_READ_SETTING.to_owned()))
        .collect();
    for f in user.into_iter().chain(project) {
        let Some(list) = f
            .block
            .filesystem
            .as_ref()
            .and_then(|fs| fs.deny_read.as_ref())
        else {
            continue;
        };
        let from = format!("{} sandbox.filesystem.denyRead", f.shown);
        for path in list {
            let path = path
                .strip_prefix('/')
                .filter(|p| p.starts_with('/'))
                .unwrap_or(path);
            let Ok(resolved) = crate::tools::resolve_path(dir, path) else {
                continue;
            };
            // A repository's path that holds the workspace would stop every command: left
            // out, and named in the status.
            let is_project = !user.is_some_and(|u| std::ptr::eq(u, f));
            if is_project && dir.starts_with(&resolved) {
                skipped.push(format!("{}: {path:?} holds the workspace", f.shown));
                continue;
            }
            out.push((resolved, from.clone()));
        }
    }
    Ok(out)
}

/// With the user's settings file unreadable (`why`) and `sandbox.allowed-domains` unset, the
/// network held closed: an empty allowed list, its source saying why.
fn hold_closed(lisp: &Lisp, domains: &mut Option<Domains>, why: String) -> Result<(), LispError> {
    if optional_strings(lisp, ALLOWED_SETTING)?.is_some() {
        return Ok(());
    }
    let mut held = domains.take().unwrap_or_default();
    held.allowed = Some(Vec::new());
    held.allowed_from = format!("{why} (the network is held closed until it can be read)");
    if held.denied_from.is_empty() {
        held.denied_from = DENIED_SETTING.into();
    }
    *domains = Some(held);
    Ok(())
}

/// Claude Code's user settings file, and how it is shown.
fn user_file() -> Option<(PathBuf, String)> {
    match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => {
            let path = PathBuf::from(dir).join("settings.json");
            let shown = path.display().to_string();
            Some((path, shown))
        }
        None => {
            let home = PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?);
            let path = home.join(".claude/settings.json");
            Some((path, "~/.claude/settings.json".to_owned()))
        }
    }
}

/// The `sandbox` block of the settings file at `path`, if it has one; a file that cannot be
/// read as JSON is noted in `lists.skipped`.
fn read(path: &Path, shown: &str, lists: &mut Lists) -> Option<Found> {
    let file = match crate::regular::open_regular(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            lists.skipped.push(format!("{shown}: {e}"));
            return None;
        }
    };
    let mut bytes = Vec::new();
    use std::io::Read;
    if let Err(e) = file.take(MAX_SETTINGS_BYTES + 1).read_to_end(&mut bytes) {
        lists.skipped.push(format!("{shown}: {e}"));
        return None;
    }
    if bytes.len() as u64 > MAX_SETTINGS_BYTES {
        lists
            .skipped
            .push(format!("{shown}: larger than {MAX_SETTINGS_BYTES} bytes"));
        return None;
    }
    match serde_json::from_slice::<SettingsFile>(&bytes) {
        Ok(SettingsFile {
            sandbox: Some(block),
        }) => Some(Found {
            shown: shown.to_owned(),
            block,
        }),
        Ok(_) => None,
        Err(e) => {
            lists.skipped.push(format!("{shown}: {e}"));
            None
        }
    }
}

/// A list-of-strings setting that may be unset (`nil`).
fn optional_strings(lisp: &Lisp, name: &str) -> Result<Option<Vec<String>>, LispError> {
    match lisp.setting::<serde_json::Value>(name)? {
        serde_json::Value::Null => Ok(None),
        _ => super::strings(lisp, name).map(Some),
    }
}

/// `a` and `b` as one source.
fn joined(a: &str, b: &str) -> String {
    match a.is_empty() {
        true => b.to_owned(),
        false => format!("{a}, narrowed by {b}"),
    }
}
