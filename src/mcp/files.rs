//! MCP servers from the files other agents' users already have: Claude Code's project file
//! `.mcp.json` (`{"mcpServers": {NAME: {"command", "args", "env"} | {"type": "http", "url",
//! "headers"}}}`, `${VAR}` and `${VAR:-default}` expanded in every value) and the
//! `[mcp_servers.NAME]` tables of Codex's `config.toml` (`command`, `args`, `env`, `url`,
//! `http_headers`, `env_http_headers`, `bearer_token_env_var`, `enabled`; other keys are
//! ignored, as oml passes its environment on and starts a server in the session's directory).
//!
//! Each server read is a [`FileServer`]: how the file writes it, and the [`ServerSpec`] with its
//! values taken from the environment the caller passes, or why it cannot be used
//! ([`Unusable`]). A file that cannot be read as JSON or TOML is a [`BadFile`] naming its line,
//! and costs only its own servers. It knows nothing of where the files are, of trust, or of
//! oml's own servers: `crate::bind::mcp` decides which of these a session starts.

use std::io::Read as _;
use std::path::Path;

use serde_json::{Map, Value};

use super::{ServerSpec, Transport};

/// Claude Code's project file, at the project root.
pub const MCP_JSON: &str = ".mcp.json";
/// Codex's configuration file, in `$CODEX_HOME` (`~/.codex`).
pub const CODEX_CONFIG: &str = "config.toml";
/// Bytes of one file read at most; a larger file is a [`BadFile`].
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Servers of one file kept at most; the rest are not read.
pub const MAX_SERVERS: usize = 256;

/// Looks an environment variable up.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// One server a file describes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileServer {
    pub name: String,
    /// The line its entry starts on, or 0 when it was not found.
    pub line: usize,
    /// `stdio`, `http` or `sse`, as the file writes it; `None` when it says neither.
    pub transport: Option<&'static str>,
    /// The command line or URL as the file writes it, `${VAR}` and all.
    pub target: String,
    /// The server to start, its values taken from the environment; or why it cannot be.
    pub spec: Result<ServerSpec, Unusable>,
}

/// Why a server a file describes cannot be started.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    #[error("${{{0}}} is not set and has no default")]
    Unset(String),
    #[error("bearer_token_env_var names {0}, which is not set")]
    UnsetToken(String),
    #[error("it is disabled (enabled = false)")]
    Disabled,
    #[error(transparent)]
    Invalid(#[from] BadEntry),
}

/// What is wrong with one server's entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadEntry {
    #[error("expected a table")]
    NotATable,
    #[error("give command or url")]
    Neither,
    #[error("give command or url, not both")]
    Both,
    #[error("unknown type {0:?}")]
    UnknownType(String),
    #[error("{0} must be a non-empty string")]
    NotText(&'static str),
    #[error("args must be a list of strings")]
    Args,
    #[error("{0} must be a table of strings")]
    NotPairs(&'static str),
    #[error("it has no name")]
    NoName,
}

/// Why a whole file gives no server.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadFile {
    #[error("cannot read it: {0}")]
    Unreadable(String),
    #[error("it is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge,
    #[error("bad JSON at line {line}: {message}")]
    Json { line: usize, message: String },
    #[error("bad TOML at line {line}: {message}")]
    Toml { line: usize, message: String },
    #[error("{0} is not a table of servers")]
    NotATable(&'static str),
}

impl BadFile {
    /// The line the problem is on, or 0.
    pub fn line(&self) -> usize {
        match self {
            BadFile::Json { line, .. } | BadFile::Toml { line, .. } => *line,
            _ => 0,
        }
    }
}

/// The text of the regular file at `path`, at most [`MAX_FILE_BYTES`]; `None` when there is
/// nothing there.
pub fn read_text(path: &Path) -> Option<Result<String, BadFile>> {
    std::fs::symlink_metadata(path).ok()?;
    let read = || -> Result<String, BadFile> {
        let unreadable = |e: std::io::Error| BadFile::Unreadable(e.to_string());
        let file = crate::regular::open_regular(path).map_err(unreadable)?;
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(unreadable)?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(BadFile::TooLarge);
        }
        String::from_utf8(bytes).map_err(|e| BadFile::Unreadable(e.to_string()))
    };
    Some(read())
}

/// The servers of a `.mcp.json` text, `${VAR}` expanded from `env`.
pub fn mcp_json(text: &str, env: Env) -> Result<Vec<FileServer>, BadFile> {
    let value: Value = serde_json::from_str(text).map_err(|e| BadFile::Json {
        line: e.line(),
        message: e.to_string(),
    })?;
    let servers = match value.get("mcpServers") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(BadFile::NotATable("mcpServers")),
    };
    // The entries are in the file's order: each key is looked for after the one before.
    let mut from = text.find("\"mcpServers\"").unwrap_or(0);
    let mut out = Vec::new();
    for (name, entry) in servers.iter().take(MAX_SERVERS) {
        let key = serde_json::to_string(name).unwrap_or_default();
        let line = key_line(text, &mut from, &key);
        out.push(match claude_entry(entry) {
            Ok(written) => {
                let spec = expanded(&written, env).and_then(|t| valid(name, t));
                server(name, line, Some(&written), spec)
            }
            Err(why) => server(name, line, None, Err(why.into())),
        });
    }
    Ok(out)
}

/// The `[mcp_servers]` of a Codex `config.toml` text; `bearer_token_env_var` and
/// `env_http_headers` name variables of `env`.
pub fn codex_toml(text: &str, env: Env) -> Result<Vec<FileServer>, BadFile> {
    let table: toml::Table = toml::from_str(text).map_err(|e| BadFile::Toml {
        line: e
            .span()
            .map_or(1, |s| 1 + count_lines(&text[..s.start.min(text.len())])),
        message: e.message().trim().to_owned(),
    })?;
    let servers = match table.get("mcp_servers") {
        None => return Ok(Vec::new()),
        Some(toml::Value::Table(t)) => t,
        Some(_) => return Err(BadFile::NotATable("mcp_servers")),
    };
    let servers = servers.iter().take(MAX_SERVERS).map(|(name, entry)| {
        let dotted = format!("mcp_servers.{name}");
        let quoted = format!("mcp_servers.\"{name}\"");
        let line = line_of(text, 0, &[&dotted, &quoted]);
        let entry = serde_json::to_value(entry).unwrap_or(Value::Null);
        match codex_entry(&entry, env) {
            Ok((written, spec)) => {
                let spec = match entry.get("enabled") {
                    Some(Value::Bool(false)) => Err(Unusable::Disabled),
                    _ => spec.and_then(|t| valid(name, t)),
                };
                server(name, line, Some(&written), spec)
            }
            Err(why) => server(name, line, None, Err(why.into())),
        }
    });
    Ok(servers.collect())
}

fn server(
    name: &str,
    line: usize,
    written: Option<&Transport>,
    spec: Result<ServerSpec, Unusable>,
) -> FileServer {
    FileServer {
        name: name.to_owned(),
        line,
        transport: written.map(Transport::kind),
        target: written.map(Transport::target).unwrap_or_default(),
        spec,
    }
}

/// The spec of `transport` under `name`, when the name is one a server may have.
fn valid(name: &str, transport: Transport) -> Result<ServerSpec, Unusable> {
    ServerSpec::named(name.to_owned(), transport).map_err(|_| BadEntry::NoName.into())
}

/// `text` with each `${VAR}` replaced by the variable's value and each `${VAR:-default}` by its
/// value, or `default` when it is unset or empty; a `${` without its `}` stays as it is.
pub fn expand(text: &str, env: Env) -> Result<String, Unusable> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            break;
        };
        out.push_str(&rest[..at]);
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match (env(name), default) {
            (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(Unusable::Unset(name.to_owned())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `transport` with every value expanded ([`expand`]).
fn expanded(transport: &Transport, env: Env) -> Result<Transport, Unusable> {
    let one = |s: &String| expand(s, env);
    let pairs = |v: &[(String, String)]| -> Result<Vec<(String, String)>, Unusable> {
        v.iter().map(|(k, v)| Ok((k.clone(), one(v)?))).collect()
    };
    Ok(match transport {
        Transport::Stdio { command, args, env } => Transport::Stdio {
            command: one(command)?,
            args: args.iter().map(one).collect::<Result<_, _>>()?,
            env: pairs(env)?,
        },
        Transport::Http { url, headers } => Transport::Http {
            url: one(url)?,
            headers: pairs(headers)?,
        },
        Transport::Sse { url } => Transport::Sse { url: one(url)? },
    })
}

/// One entry of Claude Code's `mcpServers`, as written.
fn claude_entry(entry: &Value) -> Result<Transport, BadEntry> {
    let obj = entry.as_object().ok_or(BadEntry::NotATable)?;
    let url = || text(obj, "url");
    match obj.get("type").and_then(Value::as_str) {
        Some("http") | Some("streamable-http") => http(obj, url()?, "headers"),
        Some("sse") => Ok(Transport::Sse { url: url()? }),
        Some("stdio") => stdio(obj),
        None if obj.contains_key("command") => stdio(obj),
        None if obj.contains_key("url") => http(obj, url()?, "headers"),
        None => Err(BadEntry::Neither),
        Some(other) => Err(BadEntry::UnknownType(other.to_owned())),
    }
}

/// One `[mcp_servers.NAME]` of Codex, as written, and with its variables taken from `env`.
fn codex_entry(
    entry: &Value,
    env: Env,
) -> Result<(Transport, Result<Transport, Unusable>), BadEntry> {
    let obj = entry.as_object().ok_or(BadEntry::NotATable)?;
    match (obj.contains_key("command"), obj.contains_key("url")) {
        (true, true) => Err(BadEntry::Both),
        (false, false) => Err(BadEntry::Neither),
        (true, false) => stdio(obj).map(|t| (t.clone(), Ok(t))),
        (false, true) => {
            let written = http(obj, text(obj, "url")?, "http_headers")?;
            let Transport::Http { url, mut headers } = written.clone() else {
                unreachable!("http gives an HTTP transport")
            };
            for (header, var) in pairs(obj, "env_http_headers")? {
                headers.extend(env(&var).map(|value| (header, value)));
            }
            let bearer = match obj.get("bearer_token_env_var").and_then(Value::as_str) {
                Some(var) => match env(var) {
                    Some(token) => Ok(Some(token)),
                    None => Err(Unusable::UnsetToken(var.to_owned())),
                },
                None => Ok(None),
            };
            let spec = bearer.map(|token| {
                headers.extend(token.map(|t| ("Authorization".to_owned(), format!("Bearer {t}"))));
                Transport::Http { url, headers }
            });
            Ok((written, spec))
        }
    }
}

fn stdio(obj: &Map<String, Value>) -> Result<Transport, BadEntry> {
    let args = match obj.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| scalar(v).ok_or(BadEntry::Args))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(BadEntry::Args),
    };
    Ok(Transport::Stdio {
        command: text(obj, "command")?,
        args,
        env: pairs(obj, "env")?,
    })
}

fn http(obj: &Map<String, Value>, url: String, key: &'static str) -> Result<Transport, BadEntry> {
    Ok(Transport::Http {
        url,
        headers: pairs(obj, key)?,
    })
}

/// A string, number or boolean as text.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn text(obj: &Map<String, Value>, key: &'static str) -> Result<String, BadEntry> {
    match obj.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        _ => Err(BadEntry::NotText(key)),
    }
}

/// The table `key` of `obj` as name, value pairs (absent: none).
fn pairs(obj: &Map<String, Value>, key: &'static str) -> Result<Vec<(String, String)>, BadEntry> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                scalar(v)
                    .map(|v| (k.clone(), v))
                    .ok_or(BadEntry::NotPairs(key))
            })
            .collect(),
        Some(_) => Err(BadEntry::NotPairs(key)),
    }
}

/// The line (from 1) of the first of `needles` found in `text` after byte `from`, or 0.
fn line_of(text: &str, from: usize, needles: &[&str]) -> usize {
    let tail = text.get(from..).unwrap_or_default();
    needles
        .iter()
        .find_map(|n| tail.find(n))
        .map_or(0, |at| 1 + count_lines(&text[..from + at]))
}

/// The line (from 1) of the object key `key` (quoted as JSON) in `text` after byte `from`,
/// which moves past it; 0 when it is not found.
fn key_line(text: &str, from: &mut usize, key: &str) -> usize {
    let mut at = *from;
    while let Some(found) = text.get(at..).and_then(|t| t.find(key)) {
        let end = at + found + key.len();
        if text[end..].trim_start().starts_with(':') {
            *from = end;
            return 1 + count_lines(&text[..at + found]);
        }
        at = end;
    }
    0
}

fn count_lines(text: &str) -> usize {
    text.bytes().filter(|b| *b == b'\n').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME_DIR" => Some("/home/u".into()),
            "EMPTY" => Some(String::new()),
            "TOKEN" => Some("t0k".into()),
            _ => None,
        }
    }

    #[test]
    fn variables_expand_with_defaults_and_an_unset_one_is_named() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("${HOME_DIR}/bin", Ok("/home/u/bin")),
            ("a${NOPE:-x y}b", Ok("ax yb")),
            ("${EMPTY:-d}|${EMPTY}|", Ok("d||")),
            ("${HOME_DIR:-d}", Ok("/home/u")),
            ("$HOME_DIR ${ open", Ok("$HOME_DIR ${ open")),
            ("x${NOPE}", Err("NOPE")),
            ("", Ok("")),
        ];
        for (text, want) in cases {
            let got = expand(text, &env);
            match want {
                Ok(w) => assert_eq!(got.as_deref(), Ok(*w), "{text}"),
                Err(v) => assert_eq!(got, Err(Unusable::Unset((*v).into())), "{text}"),
            }
        }
    }

    #[test]
    fn claude_servers_are_read_expanded_with_their_lines() {
        let text = r#"{
  "mcpServers": {
    "files": {"command": "${HOME_DIR}/srv", "args": ["--root", "${NOPE:-.}", 3],
              "env": {"T": "${TOKEN}"}},
    "web": {"type": "http", "url": "https://h/${TOKEN}", "headers": {"Authorization": "Bearer ${TOKEN}"}},
    "gone": {"command": "x", "env": {"K": "${MISSING}"}, "args": ["odd"]},
    "odd": {"type": "ws", "url": "u"},
    "old": {"type": "sse", "url": "http://h/sse"}
  }
}"#;
        let servers = mcp_json(text, &env).unwrap();
        let by = |n: &str| servers.iter().find(|s| s.name == n).unwrap();
        assert_eq!(
            by("files").spec.as_ref().unwrap().transport,
            Transport::Stdio {
                command: "/home/u/srv".into(),
                args: vec!["--root".into(), ".".into(), "3".into()],
                env: vec![("T".into(), "t0k".into())],
            }
        );
        assert_eq!(by("files").line, 3);
        assert_eq!(by("files").target, "${HOME_DIR}/srv --root ${NOPE:-.} 3");
        assert_eq!(
            by("web").spec.as_ref().unwrap().transport,
            Transport::Http {
                url: "https://h/t0k".into(),
                headers: vec![("Authorization".into(), "Bearer t0k".into())],
            }
        );
        assert_eq!(by("web").transport, Some("http"));
        assert_eq!(by("gone").spec, Err(Unusable::Unset("MISSING".into())));
        assert_eq!(by("gone").line, 6);
        assert_eq!(
            by("odd").spec,
            Err(BadEntry::UnknownType("ws".into()).into())
        );
        assert_eq!(by("odd").transport, None);
        assert_eq!(
            by("odd").line,
            7,
            "the key, not the same text as a value before it"
        );
        assert_eq!(by("old").transport, Some("sse"));
    }

    #[test]
    fn a_bad_file_names_its_line_and_no_servers_is_not_a_problem() {
        let bad = mcp_json("{\n  \"mcpServers\": {\n    \"a\": {,}\n}", &env).unwrap_err();
        assert_eq!(bad.line(), 3, "{bad}");
        assert!(bad.to_string().starts_with("bad JSON at line 3: "), "{bad}");
        assert_eq!(mcp_json("{}", &env), Ok(Vec::new()));
        assert_eq!(
            mcp_json(r#"{"mcpServers": []}"#, &env),
            Err(BadFile::NotATable("mcpServers"))
        );
        let bad = codex_toml("model = \"x\"\n[mcp_servers.a\ncommand = 1\n", &env).unwrap_err();
        assert_eq!(bad.line(), 2, "{bad}");
        assert!(bad.to_string().starts_with("bad TOML at line 2: "), "{bad}");
        assert_eq!(codex_toml("model = \"x\"\n", &env), Ok(Vec::new()));
    }

    #[test]
    fn codex_servers_take_their_token_and_headers_from_the_environment() {
        let text = r#"model = "o3"

[mcp_servers.docs]
command = "docs-mcp"
args = ["--port", "${TOKEN}"]
env = { A = "1" }

[mcp_servers.web]
url = "https://h/mcp"
bearer_token_env_var = "TOKEN"
http_headers = { "X-A" = "b" }
env_http_headers = { "X-Home" = "HOME_DIR", "X-None" = "NOPE" }

[mcp_servers.off]
command = "off"
enabled = false

[mcp_servers.locked]
url = "https://h/2"
bearer_token_env_var = "NOPE"

[mcp_servers.both]
command = "a"
url = "b"
"#;
        let servers = codex_toml(text, &env).unwrap();
        let by = |n: &str| servers.iter().find(|s| s.name == n).unwrap();
        // Codex expands nothing in its values.
        assert_eq!(
            by("docs").spec.as_ref().unwrap().transport,
            Transport::Stdio {
                command: "docs-mcp".into(),
                args: vec!["--port".into(), "${TOKEN}".into()],
                env: vec![("A".into(), "1".into())],
            }
        );
        assert_eq!(by("docs").line, 3);
        let Transport::Http { url, headers } = &by("web").spec.as_ref().unwrap().transport else {
            panic!("{:?}", by("web"))
        };
        assert_eq!(url, "https://h/mcp");
        let mut headers = headers.clone();
        headers.sort();
        assert_eq!(
            headers,
            [
                ("Authorization".to_owned(), "Bearer t0k".to_owned()),
                ("X-A".to_owned(), "b".to_owned()),
                ("X-Home".to_owned(), "/home/u".to_owned()),
            ]
        );
        assert!(!by("web").target.contains("t0k"));
        assert_eq!(by("off").spec, Err(Unusable::Disabled));
        assert_eq!(by("locked").spec, Err(Unusable::UnsetToken("NOPE".into())));
        assert_eq!(by("both").spec, Err(BadEntry::Both.into()));
    }

    #[test]
    fn a_file_that_is_not_regular_or_too_large_is_a_bad_file() {
        let t = tempfile::tempdir().unwrap();
        assert!(read_text(&t.path().join("missing")).is_none());
        assert!(matches!(
            read_text(t.path()),
            Some(Err(BadFile::Unreadable(_)))
        ));
        let big = t.path().join("big.json");
        std::fs::write(&big, vec![b' '; MAX_FILE_BYTES as usize + 1]).unwrap();
        assert_eq!(read_text(&big), Some(Err(BadFile::TooLarge)));
        std::fs::write(&big, "{}").unwrap();
        assert_eq!(read_text(&big), Some(Ok("{}".into())));
    }
}
