//! The catalog of known ACP agents, discovery on `PATH`, and the Fennel configuration oml
//! proposes for what it finds (see docs/src/agents.md).
//!
//! The catalog is data: one `Entry` per agent, in [`entries`]: every agent of the ACP agent
//! registry's snapshot embedded in the binary (`registry`, `catalog/registry/registry.json`) and
//! oml's own entries (`known`) for the agents the registry lacks. An agent in both keeps oml's id,
//! command names and arguments (so discovery and the proposed configuration work as they did)
//! and takes its name, description, version, homepage and distribution from the registry.
//! Discovery looks on `PATH` for the catalog's command names only (executable regular files,
//! first match wins). It never scans other executables, installs or downloads anything, queries
//! a network registry (the snapshot is refreshed by hand, `scripts/refresh-registry.sh`), or
//! edits configuration; proposing configuration means returning text for the user to review.

mod known;
pub mod offer;
pub mod registry;

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Whether an agent needs authentication before `session/new` (as the ACP registry's probe of
/// 2026-08-20 saw it with no credentials), and how it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// `session/new` works without logging in first.
    NotRequired,
    /// `session/new` fails until the user authenticates; `how` says how.
    Required { how: &'static str },
    /// Not probed, or the result is not known.
    Unknown,
}

impl Auth {
    pub fn as_str(self) -> &'static str {
        match self {
            Auth::NotRequired => "none",
            Auth::Required { .. } => "required",
            Auth::Unknown => "unknown",
        }
    }

    pub fn how(self) -> &'static str {
        match self {
            Auth::Required { how } => how,
            _ => "",
        }
    }
}

/// Where a catalog entry's description comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The ACP agent registry's snapshot (with oml's command names when oml knows the agent).
    Registry,
    /// oml's own table: an agent the registry lacks.
    Oml,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Registry => "registry",
            Source::Oml => "oml",
        }
    }
}

/// One known ACP agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// A short identifier: lowercase letters, digits and dashes (`claude`, `gemini`).
    pub id: &'static str,
    pub name: &'static str,
    /// The command names to look for on `PATH`, preferred first.
    pub commands: &'static [&'static str],
    /// The arguments that start ACP mode on stdio.
    pub args: &'static [&'static str],
    /// Variables to set when launching it (part of the proposed configuration).
    pub env: &'static [(&'static str, &'static str)],
    /// Variables the agent reads for its own provider and credentials (informational).
    pub env_hints: &'static [&'static str],
    pub auth: Auth,
    /// Empty for oml itself, which has no separate home.
    pub homepage: &'static str,
    pub source: Source,
    /// Its id in the registry (empty when not there).
    pub registry_id: &'static str,
    /// The registry's description and version (empty for oml's own entries).
    pub description: &'static str,
    pub version: &'static str,
    /// What runs an installed copy, as the registry says: a binary's `cmd`, an npm or a PyPI
    /// package.
    pub runs: &'static [(registry::Kind, &'static str)],
}

/// The id of oml itself, always available as the running binary.
pub const OML_ID: &str = "oml";

/// The catalog, built once from the embedded snapshot and oml's table: oml's agents first (in
/// its order, merged with the registry's entry for the same agent), then the registry's other
/// agents in its order, oml itself last. Its strings live as long as the process (built once).
pub fn entries() -> &'static [Entry] {
    &CATALOG.entries
}

/// The snapshot's entries that were left out, and why (none in the snapshot this binary was
/// built with, which tests check).
pub fn skipped() -> &'static [registry::Skipped] {
    &CATALOG.skipped
}

struct Catalog {
    entries: Vec<Entry>,
    skipped: Vec<registry::Skipped>,
}

static CATALOG: std::sync::LazyLock<Catalog> = std::sync::LazyLock::new(|| {
    let parsed = match registry::parse(registry::SNAPSHOT) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!("the embedded agent registry: {e}");
            registry::Parsed {
                version: String::new(),
                agents: Vec::new(),
                skipped: Vec::new(),
            }
        }
    };
    Catalog {
        entries: merge(known::KNOWN, &parsed.agents),
        skipped: parsed.skipped,
    }
});

/// oml's entries merged with the registry's agents (see [`entries`]).
fn merge(known: &'static [Entry], agents: &[registry::Agent]) -> Vec<Entry> {
    let registry_id = |e: &Entry| {
        known::REGISTRY_IDS
            .iter()
            .find(|(oml, _)| *oml == e.id)
            .map_or(e.id, |(_, reg)| *reg)
    };
    let mut used = vec![false; agents.len()];
    let mut out = Vec::new();
    for e in known.iter().filter(|e| e.id != OML_ID) {
        let found = agents.iter().position(|a| a.id == registry_id(e));
        match found {
            Some(i) => {
                used[i] = true;
                out.push(from_registry(Some(e), &agents[i]));
            }
            None => out.push(*e),
        }
    }
    for (a, _) in agents.iter().zip(&used).filter(|(_, used)| !**used) {
        if !out.iter().any(|e| e.id == a.id) && a.id != OML_ID {
            out.push(from_registry(None, a));
        }
    }
    out.extend(known.iter().filter(|e| e.id == OML_ID).copied());
    out
}

/// The entry for registry agent `a`, keeping what oml knows of it (`known`).
fn from_registry(known: Option<&Entry>, a: &registry::Agent) -> Entry {
    let homepage = a.website.as_deref().or(a.repository.as_deref());
    let runs: Vec<(registry::Kind, &'static str)> = registry::runs(&a.distribution)
        .into_iter()
        .map(|(kind, what)| (kind, leak(what)))
        .collect();
    let base = match known {
        Some(e) => *e,
        None => {
            let (args, env) = registry::launch(&a.distribution);
            let env: Vec<(&'static str, &'static str)> =
                env.into_iter().map(|(k, v)| (leak(k), leak(v))).collect();
            Entry {
                id: leak(a.id.clone()),
                name: "",
                commands: leak_all(registry::commands(&a.distribution)),
                args: leak_all(args),
                env: env.leak(),
                env_hints: &[],
                auth: Auth::Unknown,
                homepage: "",
                source: Source::Registry,
                registry_id: "",
                description: "",
                version: "",
                runs: &[],
            }
        }
    };
    Entry {
        name: leak(a.name.clone()),
        homepage: homepage.map_or(base.homepage, |h| leak(h.to_owned())),
        source: Source::Registry,
        registry_id: leak(a.id.clone()),
        description: leak(a.description.clone()),
        version: leak(a.version.clone()),
        runs: runs.leak(),
        ..base
    }
}

/// A string kept for the process's life (the catalog is built once).
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn leak_all(v: Vec<String>) -> &'static [&'static str] {
    v.into_iter().map(leak).collect::<Vec<_>>().leak()
}

/// The catalog entry with this id.
pub fn find(id: &str) -> Option<&'static Entry> {
    entries().iter().find(|e| e.id == id)
}

/// An entry found on this machine: the executable and the arguments that start ACP mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub entry: &'static Entry,
    pub path: PathBuf,
}

/// Whether `path` is a regular file (after symlinks) with an execute bit.
fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where `entry` is, given the value of `PATH`: its command names in order of preference, each
/// looked up in `PATH`'s folders in order (empty folders are skipped, not taken as `.`). oml
/// itself is the running binary.
pub fn locate(entry: &'static Entry, path_var: Option<&OsStr>) -> Option<Found> {
    if entry.id == OML_ID {
        return std::env::current_exe()
            .ok()
            .map(|path| Found { entry, path });
    }
    let path_var = path_var?;
    for name in entry.commands {
        for dir in std::env::split_paths(path_var) {
            if dir.as_os_str().is_empty() {
                continue;
            }
            let candidate = dir.join(name);
            if is_executable_file(&candidate) {
                return Some(Found {
                    entry,
                    path: candidate,
                });
            }
        }
    }
    None
}

/// Every catalog entry with where it was found, if it was, in catalog order.
pub fn discover(path_var: Option<&OsStr>) -> Vec<(&'static Entry, Option<Found>)> {
    entries().iter().map(|e| (e, locate(e, path_var))).collect()
}

/// Discovery with this process's `PATH`.
pub fn discover_env() -> Vec<(&'static Entry, Option<Found>)> {
    discover(std::env::var_os("PATH").as_deref())
}

/// The found entries other than oml itself.
pub fn found_external(discovered: &[(&'static Entry, Option<Found>)]) -> Vec<Found> {
    discovered
        .iter()
        .filter_map(|(_, f)| f.clone())
        .filter(|f| f.entry.id != OML_ID)
        .collect()
}

/// A Fennel string literal.
pub fn fennel_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `(client.defagent :id {:command "/path" :args [...]})` for one found agent.
pub fn defagent_form(found: &Found) -> String {
    let e = found.entry;
    let args: Vec<String> = e.args.iter().map(|a| fennel_string(a)).collect();
    let mut s = format!(
        "(client.defagent :{} {{:command {} :args [{}]",
        e.id,
        fennel_string(&found.path.to_string_lossy()),
        args.join(" ")
    );
    if !e.env.is_empty() {
        let env: Vec<String> = e
            .env
            .iter()
            .map(|(k, v)| format!("{} {}", fennel_string(k), fennel_string(v)))
            .collect();
        let _ = write!(s, " :env {{{}}}", env.join(" "));
    }
    s.push_str("})");
    s
}

/// The proposed configuration for the found agents: one `client.defagent` per agent and a
/// `setq client.default-agent` naming the first external agent found (oml itself when it is the
/// only one). Empty when nothing is found.
pub fn proposed_config(found: &[Found]) -> String {
    let mut s = String::new();
    if found.is_empty() {
        return s;
    }
    s.push_str(";; ACP agents found on PATH by `oml agents`; review and edit freely.\n");
    for f in found {
        s.push_str(&defagent_form(f));
        s.push('\n');
    }
    let default = found
        .iter()
        .find(|f| f.entry.id != OML_ID)
        .unwrap_or(&found[0]);
    let _ = writeln!(s, "(setq client.default-agent :{})", default.entry.id);
    s
}

/// The catalog as a Markdown table (the one in docs/src/agents.md).
pub fn markdown_table() -> String {
    let code = |s: &str| format!("`{s}`");
    let mut s = String::from(
        "| Id | Agent | Source | Commands looked for | ACP arguments | Auth before `session/new` | Homepage |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for e in entries() {
        let commands: Vec<String> = e.commands.iter().map(|c| code(c)).collect();
        let args = if e.args.is_empty() {
            "(none)".to_owned()
        } else {
            code(&e.args.join(" "))
        };
        let auth = match e.auth {
            Auth::Required { how } => format!("required: {how}"),
            other => other.as_str().to_owned(),
        };
        let mut commands = commands.join(", ");
        if e.id == OML_ID {
            commands = "the running binary".to_owned();
        }
        let homepage = if e.homepage.is_empty() {
            "(this program)".to_owned()
        } else {
            format!("<{}>", e.homepage)
        };
        let source = match e.source {
            Source::Registry if e.version.is_empty() => "registry".to_owned(),
            Source::Registry => format!("registry `{}` {}", e.registry_id, e.version),
            Source::Oml => "oml".to_owned(),
        };
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {} | {} |",
            e.id, e.name, source, commands, args, auth, homepage
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_well_formed() {
        let mut ids = std::collections::HashSet::new();
        for e in entries() {
            assert!(ids.insert(e.id), "duplicate id {}", e.id);
            assert!(
                !e.id.is_empty()
                    && e.id.starts_with(|c: char| c.is_ascii_lowercase())
                    && e.id
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "bad id {:?}",
                e.id
            );
            assert!(!e.name.is_empty(), "{} has no name", e.id);
            assert!(!e.commands.is_empty(), "{} has no command", e.id);
            for c in e.commands {
                assert!(
                    !c.is_empty() && !c.contains('/') && !c.contains(char::is_whitespace),
                    "{}: bad command name {c:?}",
                    e.id
                );
            }
            for a in e.args {
                assert!(
                    !a.is_empty() && !a.contains(char::is_whitespace),
                    "{}: bad argument {a:?}",
                    e.id
                );
            }
            for (k, _) in e.env {
                assert!(!k.is_empty() && !k.contains('='), "{}: bad env {k:?}", e.id);
            }
            assert!(
                e.homepage.starts_with("https://") || e.id == OML_ID,
                "{}: homepage",
                e.id
            );
        }
        for id in [
            "claude",
            "codex",
            "gemini",
            "qwen",
            "opencode",
            "kilo",
            "goose",
            "cline",
            "copilot",
            "auggie",
            "cursor",
            "kimi",
            "vibe",
            "fast-agent",
            "junie",
            "devin",
            "qoder",
            "openhands",
            "kiro",
            "oml",
        ] {
            assert!(find(id).is_some(), "{id} is missing");
        }
        assert_eq!(
            find("claude").unwrap().commands,
            &["claude-agent-acp", "claude-code-acp"]
        );
    }

    #[test]
    fn fennel_strings_escape() {
        assert_eq!(fennel_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn a_hostile_registry_entry_stays_data_in_the_proposal() {
        let text = r#"{"version": "1.0.0", "agents": [
            {"id": "evil", "name": "E", "version": "1.0.0", "description": "d",
             "distribution": {"npx": {"package": "evil-acp@1",
               "args": ["\") (os.execute \"touch /tmp/x\") (\""],
               "env": {"K\"": "v\n(os.exit)"}}}},
            {"id": "oml", "name": "Not oml", "version": "1.0.0", "description": "d",
             "distribution": {"npx": {"package": "oml@1"}}}
        ]}"#;
        let parsed = registry::parse(text).unwrap();
        let merged = merge(known::KNOWN, &parsed.agents);
        // The registry cannot replace oml itself.
        let oml: Vec<&Entry> = merged.iter().filter(|e| e.id == OML_ID).collect();
        assert_eq!(oml.len(), 1);
        assert_eq!(oml[0].source, Source::Oml);
        let evil: &'static Entry =
            Box::leak(Box::new(*merged.iter().find(|e| e.id == "evil").unwrap()));
        assert_eq!(evil.commands, ["evil-acp"]);
        let form = defagent_form(&Found {
            entry: evil,
            path: "/x/evil-acp".into(),
        });
        assert_eq!(
            form,
            r#"(client.defagent :evil {:command "/x/evil-acp" :args ["\") (os.execute \"touch /tmp/x\") (\""] :env {"K\"" "v\n(os.exit)"}})"#
        );
    }

    #[test]
    fn the_proposal_names_the_first_external_agent_as_default() {
        let oml = Found {
            entry: find("oml").unwrap(),
            path: "/bin/oml".into(),
        };
        let codex = Found {
            entry: find("codex").unwrap(),
            path: "/x/codex-acp".into(),
        };
        let text = proposed_config(&[codex, oml]);
        assert!(text.contains(r#"(client.defagent :codex {:command "/x/codex-acp" :args []})"#));
        assert!(text.contains(r#"(client.defagent :oml {:command "/bin/oml" :args ["acp"]})"#));
        assert!(text.ends_with("(setq client.default-agent :codex)\n"));
    }
}
