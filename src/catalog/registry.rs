//! The ACP agent registry's `registry.json`, as embedded in the binary (the snapshot in
//! `catalog/registry/`, refreshed by hand with `scripts/refresh-registry.sh`): its serde types, and
//! the one parse that reads each agent entry, keeping the well-formed ones and the reason each
//! other one was skipped.
//!
//! It knows the registry's format (`catalog/registry/agent.schema.json`) and what command an
//! installed copy of an agent runs by; not `PATH`, oml's own entries or how they merge (`super`).
//! Nothing here reads the network or a file: the snapshot is a constant.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The embedded snapshot.
pub const SNAPSHOT: &str = include_str!("../../catalog/registry/registry.json");

/// The registry's platform name for the running machine (its `distribution.binary` keys).
pub const PLATFORM: &str = if cfg!(all(target_os = "linux", target_arch = "aarch64")) {
    "linux-aarch64"
} else if cfg!(all(target_os = "macos", target_arch = "aarch64")) {
    "darwin-aarch64"
} else if cfg!(target_os = "macos") {
    "darwin-x86_64"
} else if cfg!(all(target_os = "windows", target_arch = "aarch64")) {
    "windows-aarch64"
} else if cfg!(target_os = "windows") {
    "windows-x86_64"
} else {
    "linux-x86_64"
};

/// The index: its format version and its agents, each kept as sent until read on its own.
#[derive(Debug, Deserialize)]
struct Index {
    version: String,
    agents: Vec<Value>,
}

/// One agent entry (the fields oml reads; others are ignored).
#[derive(Clone, Debug, Deserialize)]
pub struct Agent {
    pub id: String,
    pub name: String,
    pub version: String,
    pub description: String,
    #[serde(default)]
    pub repository: Option<String>,
    #[serde(default)]
    pub website: Option<String>,
    #[serde(default)]
    pub license: Option<String>,
    pub distribution: Distribution,
}

/// How the registry says to get and run an agent (at least one of the three).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Distribution {
    #[serde(default)]
    pub binary: BTreeMap<String, BinaryTarget>,
    #[serde(default)]
    pub npx: Option<Package>,
    #[serde(default)]
    pub uvx: Option<Package>,
}

/// A platform's archive and the command in it.
#[derive(Clone, Debug, Deserialize)]
pub struct BinaryTarget {
    pub archive: String,
    pub cmd: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// An npm (`npx`) or PyPI (`uvx`) package, with an optional version.
#[derive(Clone, Debug, Deserialize)]
pub struct Package {
    pub package: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// The kind of thing that runs an installed copy of an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The command inside the archive for this platform (`cmd`).
    Binary,
    /// An npm package run by `npx` (name and version as the registry gives them).
    Npx,
    /// A PyPI package run by `uvx`.
    Uvx,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Binary => "binary",
            Kind::Npx => "npx",
            Kind::Uvx => "uvx",
        }
    }
}

/// Why the snapshot could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("registry.json is not a registry index: {0}")]
    NotAnIndex(#[from] serde_json::Error),
}

/// Why one agent entry was skipped.
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    #[error("not an agent entry: {0}")]
    Shape(#[from] serde_json::Error),
    #[error("id {0:?} is not lowercase letters, digits and dashes")]
    BadId(String),
    #[error("no distribution oml can name a command for")]
    NoCommand,
}

/// An entry left out, with where it was and why.
#[derive(Debug)]
pub struct Skipped {
    /// Its position in `agents`.
    pub index: usize,
    /// Its `id`, when it has a string one.
    pub id: Option<String>,
    pub error: EntryError,
}

/// The snapshot, read.
#[derive(Debug)]
pub struct Parsed {
    /// The index's format version.
    pub version: String,
    pub agents: Vec<Agent>,
    pub skipped: Vec<Skipped>,
}

/// Reads `text` as a registry index: every well-formed agent, and each other one skipped with
/// its reason.
pub fn parse(text: &str) -> Result<Parsed, RegistryError> {
    let index: Index = serde_json::from_str(text)?;
    let mut agents = Vec::new();
    let mut skipped = Vec::new();
    for (i, raw) in index.agents.into_iter().enumerate() {
        let id = raw.get("id").and_then(Value::as_str).map(str::to_owned);
        match read_agent(raw) {
            Ok(agent) => agents.push(agent),
            Err(error) => skipped.push(Skipped {
                index: i,
                id,
                error,
            }),
        }
    }
    Ok(Parsed {
        version: index.version,
        agents,
        skipped,
    })
}

fn read_agent(raw: Value) -> Result<Agent, EntryError> {
    let agent: Agent = serde_json::from_value(raw)?;
    let id_ok = agent.id.starts_with(|c: char| c.is_ascii_lowercase())
        && agent
            .id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !id_ok {
        return Err(EntryError::BadId(agent.id));
    }
    if commands(&agent.distribution).is_empty() {
        return Err(EntryError::NoCommand);
    }
    Ok(agent)
}

/// The command names an installed copy is looked for by, preferred first: this platform's
/// binary `cmd` (its file name), the npm package's name (without scope or version), the PyPI
/// package's name (without version); when no binary is for this platform, another platform's
/// `cmd`. Names that could not be a command (empty, with a space or a path) are left out.
pub fn commands(d: &Distribution) -> Vec<String> {
    let mut names = Vec::new();
    let binary = d
        .binary
        .get(PLATFORM)
        .or_else(|| d.binary.get("linux-x86_64"))
        .or_else(|| d.binary.values().next());
    if let Some(target) = d.binary.get(PLATFORM) {
        names.push(file_name(&target.cmd));
    }
    if let Some(p) = &d.npx {
        names.push(npm_name(&p.package));
    }
    if let Some(p) = &d.uvx {
        names.push(pypi_name(&p.package));
    }
    if names.is_empty()
        && let Some(target) = binary
    {
        names.push(file_name(&target.cmd).trim_end_matches(".exe").to_owned());
    }
    let mut kept: Vec<String> = Vec::new();
    for n in names {
        let usable = !n.is_empty()
            && !n.contains(['/', '\\'])
            && !n.contains(char::is_whitespace)
            && n != "."
            && n != "..";
        if usable && !kept.contains(&n) {
            kept.push(n);
        }
    }
    kept
}

/// The arguments and environment of the preferred way to run (as [`commands`] orders them).
pub fn launch(d: &Distribution) -> (Vec<String>, BTreeMap<String, String>) {
    if let Some(t) = d.binary.get(PLATFORM) {
        return (t.args.clone(), t.env.clone());
    }
    if let Some(p) = d.npx.as_ref().or(d.uvx.as_ref()) {
        return (p.args.clone(), p.env.clone());
    }
    match d.binary.values().next() {
        Some(t) => (t.args.clone(), t.env.clone()),
        None => Default::default(),
    }
}

/// What runs an installed copy, every kind the registry gives: the binary's `cmd` (this
/// platform's, else another's), the npm package, the PyPI package.
pub fn runs(d: &Distribution) -> Vec<(Kind, String)> {
    let mut out = Vec::new();
    if let Some(t) = d.binary.get(PLATFORM).or_else(|| d.binary.values().next()) {
        out.push((Kind::Binary, t.cmd.clone()));
    }
    if let Some(p) = &d.npx {
        out.push((Kind::Npx, p.package.clone()));
    }
    if let Some(p) = &d.uvx {
        out.push((Kind::Uvx, p.package.clone()));
    }
    out
}

fn file_name(cmd: &str) -> String {
    cmd.rsplit(['/', '\\']).next().unwrap_or(cmd).to_owned()
}

/// `@scope/name@1.2.3` and `name@1.2.3` → `name`.
fn npm_name(spec: &str) -> String {
    let unscoped = match spec.strip_prefix('@') {
        Some(rest) => rest.split_once('/').map_or(rest, |(_, name)| name),
        None => spec,
    };
    unscoped.split('@').next().unwrap_or(unscoped).to_owned()
}

/// `name==1.2`, `name>=1`, `name@1`, `name[extra]` → `name`.
fn pypi_name(spec: &str) -> String {
    spec.split(['=', '<', '>', '!', '@', '[', '~', ';', ' '])
        .next()
        .unwrap_or(spec)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_parses_with_nothing_skipped() {
        let parsed = parse(SNAPSHOT).unwrap();
        assert_eq!(parsed.version, "1.0.0");
        assert!(parsed.agents.len() >= 30, "{}", parsed.agents.len());
        assert!(parsed.skipped.is_empty(), "{:?}", parsed.skipped);
    }

    #[test]
    fn a_malformed_entry_is_skipped_with_its_reason() {
        let text = r#"{"version": "1.0.0", "agents": [
            {"id": "good", "name": "G", "version": "1.0.0", "description": "d",
             "distribution": {"npx": {"package": "@x/good-acp@1.0.0", "args": ["--acp"]}}},
            {"id": "no-name", "version": "1.0.0", "description": "d",
             "distribution": {"npx": {"package": "p"}}},
            {"id": "Bad_Id", "name": "B", "version": "1.0.0", "description": "d",
             "distribution": {"npx": {"package": "p"}}},
            {"id": "empty", "name": "E", "version": "1.0.0", "description": "d",
             "distribution": {}},
            "not an object"
        ]}"#;
        let parsed = parse(text).unwrap();
        assert_eq!(parsed.agents.len(), 1);
        assert_eq!(commands(&parsed.agents[0].distribution), ["good-acp"]);
        let why: Vec<(usize, Option<&str>, String)> = parsed
            .skipped
            .iter()
            .map(|s| (s.index, s.id.as_deref(), s.error.to_string()))
            .collect();
        assert_eq!(why.len(), 4, "{why:?}");
        assert!(matches!(parsed.skipped[0].error, EntryError::Shape(_)));
        assert!(why[0].2.contains("name"), "{why:?}");
        assert!(matches!(parsed.skipped[1].error, EntryError::BadId(_)));
        assert!(matches!(parsed.skipped[2].error, EntryError::NoCommand));
        assert_eq!(why[3].1, None);
        assert!(parse("[]").is_err());
    }

    #[test]
    fn command_names_come_from_the_distribution() {
        assert_eq!(npm_name("@augmentcode/auggie@0.21.0"), "auggie");
        assert_eq!(npm_name("cline@3.0.4"), "cline");
        assert_eq!(npm_name("pi-acp"), "pi-acp");
        assert_eq!(pypi_name("fast-agent-acp==0.10.1"), "fast-agent-acp");
        assert_eq!(file_name("./bin/devin"), "devin");
        assert_eq!(file_name("./bin\\devin.exe"), "devin.exe");
        let d = Distribution {
            npx: Some(Package {
                package: "../evil@1".into(),
                args: vec![],
                env: BTreeMap::new(),
            }),
            ..Distribution::default()
        };
        assert!(commands(&d).is_empty(), "{:?}", commands(&d));
    }
}
