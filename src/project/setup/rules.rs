//! The permission rules the settings files declare, typed: Claude Code's `permissions.allow`,
//! `ask` and `deny`, lists of rules such as `Bash(npm run test:*)`, `Read(./.env)`,
//! `Edit(src/**)` or `mcp__github__create_issue`, each turned into the rule table oml's
//! permission policy matches (`src/agent/permission.fnl`): a command rule on the program's
//! leading words or the exact command, a path rule with an absolute glob over the tools that
//! read or that edit, a tool rule, or an MCP server's every tool. A rule naming a tool oml does
//! not have (`WebFetch`) is kept as unsupported so it can be listed; one that cannot be read is
//! a problem naming its file.
//!
//! It knows nothing of trust, of which verdict wins, nor of how a call is matched: that is the
//! policy's, in Lisp.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::files::{Origin, SettingsFile};

/// Why a rule is no rule oml can read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("a rule's `(` is not closed by a final `)`")]
    Unclosed,
    #[error("not a rule: a tool name, then optionally a pattern in ( )")]
    NotARule,
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    #[error("an MCP tool's rule takes no pattern")]
    McpPattern,
    #[error("no MCP server named")]
    NoServer,
    #[error("not a glob: {0}")]
    BadGlob(String),
}

/// Why oml cannot apply a rule it read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error("oml has no {0} tool")]
    NoTool(String),
    #[error("a `*` before the end: oml matches a command by its leading words or whole")]
    InnerWildcard,
    #[error("a `..` in a path pattern")]
    ParentInPattern,
    #[error("no home folder for `~/`")]
    NoHome,
}

/// A rule read: one oml applies, or one it cannot.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Parsed {
    Rule(OmlRule),
    Unsupported(Unsupported),
}

/// What a rule says of the calls it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Allow,
    Ask,
    Deny,
}

impl Verdict {
    const ALL: [(Verdict, &'static str); 3] = [
        (Verdict::Allow, "allow"),
        (Verdict::Ask, "ask"),
        (Verdict::Deny, "deny"),
    ];
}

/// oml's tools a Claude Code `Read` rule covers: those that read or list files.
pub const READ_TOOLS: &[&str] = &["read", "ls", "grep", "find"];
/// oml's tools a Claude Code `Edit` or `Write` rule covers: those that change files.
pub const EDIT_TOOLS: &[&str] = &["edit", "write"];

/// Claude Code's tools oml has none of; a rule for one is listed as unsupported.
const NOT_IN_OML: &[&str] = &[
    "WebFetch",
    "WebSearch",
    "Task",
    "Agent",
    "TodoWrite",
    "NotebookRead",
    "BashOutput",
    "KillShell",
    "ExitPlanMode",
    "SlashCommand",
    "Skill",
];

/// A rule as oml's permission policy matches it (the Lisp table `agent.rule-matches?` reads).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct OmlRule {
    /// The one tool the rule covers (`bash`, `mcp__server__tool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tools a path rule covers ([`READ_TOOLS`], [`EDIT_TOOLS`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// A command's leading program words (`npm run test`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The exact command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// An absolute glob (`*` within a folder, `**` across folders) over the real paths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    /// Every tool of this MCP server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_server: Option<String>,
}

/// One rule of a settings file.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct SettingRule {
    pub verdict: Verdict,
    /// The rule as written (`Bash(npm run test:*)`).
    pub text: String,
    /// What oml matches, or `None` when oml cannot apply it (see `unsupported`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<OmlRule>,
    /// Why oml cannot apply it: a tool oml does not have, a wildcard it cannot express.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
    pub source: PathBuf,
    pub origin: Origin,
}

/// Something in a settings file's `permissions` that is not a rule oml can read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleProblem {
    pub file: PathBuf,
    pub message: String,
}

/// The rules of all the settings files, in file order, and their problems.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SettingRules {
    pub rules: Vec<SettingRule>,
    pub problems: Vec<RuleProblem>,
}

/// Where relative patterns lead: `root` for `./x`, `/x` and bare ones, `home` for `~/x`.
#[derive(Clone, Copy, Debug)]
pub struct Bases<'a> {
    pub root: &'a Path,
    pub home: Option<&'a Path>,
}

/// The permission rules of `files` (as `super::settings_files` reads them); relative path
/// patterns are taken from `bases`.
pub fn setting_rules(files: &[SettingsFile], bases: Bases) -> SettingRules {
    let mut out = SettingRules::default();
    for file in files {
        let problem = |message: String| RuleProblem {
            file: file.path.clone(),
            message,
        };
        let value = match &file.value {
            Ok(v) => v,
            Err(why) => {
                out.problems
                    .push(problem(format!("its permission rules are not used: {why}")));
                continue;
            }
        };
        let Some(permissions) = value.get("permissions") else {
            continue;
        };
        let Some(permissions) = permissions.as_object() else {
            out.problems
                .push(problem("`permissions` is not an object".into()));
            continue;
        };
        if let Some(mode) = permissions.get("defaultMode") {
            out.problems.push(problem(format!(
                "`permissions.defaultMode` {mode} is not applied: oml's mode is \
                 agent.permission-mode (or --mode)"
            )));
        }
        for (verdict, key) in Verdict::ALL {
            let Some(list) = permissions.get(key) else {
                continue;
            };
            let Some(list) = list.as_array() else {
                out.problems
                    .push(problem(format!("`permissions.{key}` is not a list")));
                continue;
            };
            for (i, item) in list.iter().enumerate() {
                let Value::String(text) = item else {
                    out.problems.push(problem(format!(
                        "`permissions.{key}[{i}]` is not a string: {item}"
                    )));
                    continue;
                };
                match parse(text, bases) {
                    Ok(Parsed::Rule(rule)) => {
                        out.rules.push(entry(file, verdict, text, Some(rule), None))
                    }
                    Ok(Parsed::Unsupported(why)) => {
                        out.rules
                            .push(entry(file, verdict, text, None, Some(why.to_string())))
                    }
                    Err(why) => out
                        .problems
                        .push(problem(format!("`permissions.{key}[{i}]` {text:?}: {why}"))),
                }
            }
        }
    }
    out
}

fn entry(
    file: &SettingsFile,
    verdict: Verdict,
    text: &str,
    rule: Option<OmlRule>,
    unsupported: Option<String>,
) -> SettingRule {
    SettingRule {
        verdict,
        text: text.to_owned(),
        rule,
        unsupported,
        source: file.path.clone(),
        origin: file.origin,
    }
}

/// The rule `text` says, or why it is no rule at all.
fn parse(text: &str, bases: Bases) -> Result<Parsed, RuleError> {
    let text = text.trim();
    let (name, spec) = match text.find('(') {
        Some(open) => {
            let Some(inner) = text[open + 1..].strip_suffix(')') else {
                return Err(RuleError::Unclosed);
            };
            (&text[..open], Some(inner.trim()))
        }
        None => (text, None),
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-*".contains(c))
    {
        return Err(RuleError::NotARule);
    }
    let spec = spec.filter(|s| !s.is_empty() && *s != "*" && *s != ":*" && *s != "**");
    let tools = |list: &[&str]| Some(list.iter().map(|t| t.to_string()).collect());
    match name {
        "Bash" => Ok(spec.map_or_else(|| Parsed::Rule(tool("bash")), bash)),
        "Read" | "Grep" | "Glob" | "LS" => path_rule(tools(READ_TOOLS), spec, bases),
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => {
            path_rule(tools(EDIT_TOOLS), spec, bases)
        }
        _ if name.starts_with("mcp__") => mcp(name, spec).map(Parsed::Rule),
        _ if NOT_IN_OML.contains(&name) => {
            Ok(Parsed::Unsupported(Unsupported::NoTool(name.to_owned())))
        }
        _ => Err(RuleError::UnknownTool(name.to_owned())),
    }
}

fn tool(name: &str) -> OmlRule {
    OmlRule {
        tool: Some(name.to_owned()),
        ..OmlRule::default()
    }
}

/// A `Bash(...)` rule: `words:*`, `words *` and `words*` name the program's leading words,
/// anything else the exact command.
fn bash(spec: &str) -> Parsed {
    let (command, prefix) = match spec.strip_suffix(":*").or_else(|| spec.strip_suffix('*')) {
        Some(head) => (head.trim(), true),
        None => (spec, false),
    };
    if command.contains('*') {
        return Parsed::Unsupported(Unsupported::InnerWildcard);
    }
    let words: Vec<&str> = command
        .split([' ', '\t'])
        .filter(|w| !w.is_empty())
        .collect();
    Parsed::Rule(match (prefix, words.is_empty()) {
        (_, true) => tool("bash"),
        (true, false) => OmlRule {
            prefix: Some(words.join(" ")),
            ..tool("bash")
        },
        (false, false) => OmlRule {
            exact: Some(command.to_owned()),
            ..tool("bash")
        },
    })
}

/// `mcp__server` and `mcp__server__*` (every tool of the server) or `mcp__server__tool`.
fn mcp(name: &str, spec: Option<&str>) -> Result<OmlRule, RuleError> {
    if spec.is_some() {
        return Err(RuleError::McpPattern);
    }
    let rest = &name["mcp__".len()..];
    let (server, tool_name) = match rest.split_once("__") {
        Some((server, t)) => (server, Some(t).filter(|t| !t.is_empty() && *t != "*")),
        None => (rest, None),
    };
    if server.is_empty() {
        return Err(RuleError::NoServer);
    }
    Ok(match tool_name {
        Some(_) => tool(name),
        None => OmlRule {
            mcp_server: Some(server.to_owned()),
            ..OmlRule::default()
        },
    })
}

/// A path rule over `tools`: every call without a pattern, else the calls on paths `spec`
/// matches (a problem when the pattern is not a glob).
fn path_rule(
    tools: Option<Vec<String>>,
    spec: Option<&str>,
    bases: Bases,
) -> Result<Parsed, RuleError> {
    let glob = match spec {
        None => None,
        Some(spec) => match absolute_glob(spec, bases) {
            Ok(g) => Some(g),
            Err(why) => return Ok(Parsed::Unsupported(why)),
        },
    };
    if let Some(g) = &glob {
        globset::GlobBuilder::new(g)
            .literal_separator(true)
            .build()
            .map_err(|e| RuleError::BadGlob(e.to_string()))?;
    }
    Ok(Parsed::Rule(OmlRule {
        tools,
        glob,
        ..OmlRule::default()
    }))
}

/// The pattern `spec` as an absolute glob, as Claude Code documents and gitignore reads them:
/// `//x` from the file system's root, `~/x` from the home folder, `/x` and `./x` from the
/// project root, a bare `x` from the project root when it holds a `/`, else at any depth
/// beneath it; a final `/` means everything inside.
pub fn absolute_glob(spec: &str, bases: Bases) -> Result<String, Unsupported> {
    let root = bases.root.display().to_string();
    let (base, rest, anywhere) = if let Some(rest) = spec.strip_prefix("//") {
        (String::new(), rest, false)
    } else if let Some(rest) = spec.strip_prefix("~/") {
        let home = bases.home.ok_or(Unsupported::NoHome)?;
        (home.display().to_string(), rest, false)
    } else if let Some(rest) = spec.strip_prefix("./").or_else(|| spec.strip_prefix('/')) {
        (root, rest, false)
    } else {
        let inner = spec.trim_end_matches('/');
        (root, spec, !inner.contains('/'))
    };
    let (rest, inside) = match rest.strip_suffix('/') {
        Some(r) => (r, true),
        None => (rest, false),
    };
    let rest = rest
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect::<Vec<_>>();
    if rest.contains(&"..") {
        return Err(Unsupported::ParentInPattern);
    }
    let base = base.trim_end_matches('/');
    let mut glob = String::from(base);
    if anywhere && !rest.is_empty() {
        glob.push_str("/**");
    }
    for part in &rest {
        glob.push('/');
        glob.push_str(part);
    }
    if inside || rest.is_empty() {
        glob.push_str("/**");
    }
    Ok(glob)
}

/// The part of the absolute glob `glob` before its first wildcard, cut at a folder: every path
/// it matches lies inside it.
pub fn literal_base(glob: &str) -> &str {
    let wild = glob.find(['*', '?', '[', '{', '\\']).unwrap_or(glob.len());
    if wild == glob.len() {
        return glob;
    }
    match glob[..wild].rfind('/') {
        Some(0) | None => "/",
        Some(slash) => &glob[..slash],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bases() -> Bases<'static> {
        Bases {
            root: Path::new("/p"),
            home: Some(Path::new("/h")),
        }
    }

    fn rule(text: &str) -> OmlRule {
        match parse(text, bases()).unwrap() {
            Parsed::Rule(r) => r,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn commands_name_leading_words_or_the_exact_command() {
        assert_eq!(rule("Bash"), tool("bash"));
        assert_eq!(rule("Bash(*)"), tool("bash"));
        let prefix = |p: &str| OmlRule {
            prefix: Some(p.into()),
            ..tool("bash")
        };
        assert_eq!(rule("Bash(npm run test:*)"), prefix("npm run test"));
        assert_eq!(rule("Bash(git diff *)"), prefix("git diff"));
        assert_eq!(rule("Bash(ls*)"), prefix("ls"));
        let exact = OmlRule {
            exact: Some("git diff".into()),
            ..tool("bash")
        };
        assert_eq!(rule(" Bash(git diff) "), exact);
        assert_eq!(
            parse("Bash(git * main)", bases()),
            Ok(Parsed::Unsupported(Unsupported::InnerWildcard))
        );
    }

    #[test]
    fn paths_are_absolute_globs_from_the_root_the_home_or_anywhere() {
        let g = |s: &str| absolute_glob(s, bases()).unwrap();
        assert_eq!(g("./.env"), "/p/.env");
        assert_eq!(g("/src/**/*.ts"), "/p/src/**/*.ts");
        assert_eq!(g("src/**"), "/p/src/**");
        assert_eq!(g("*.env"), "/p/**/*.env");
        assert_eq!(g("secrets/"), "/p/**/secrets/**");
        assert_eq!(g("~/secrets/**"), "/h/secrets/**");
        assert_eq!(g("//etc/passwd"), "/etc/passwd");
        assert!(absolute_glob("../x", bases()).is_err());
        assert_eq!(literal_base("/p/src/**"), "/p/src");
        assert_eq!(literal_base("/p/.env"), "/p/.env");
        assert_eq!(literal_base("/p/**/*.env"), "/p");
        let r = rule("Edit(src/**)");
        assert_eq!(r.tools, Some(vec!["edit".into(), "write".into()]));
        assert_eq!(r.glob.as_deref(), Some("/p/src/**"));
    }

    #[test]
    fn mcp_rules_unsupported_tools_and_problems() {
        assert_eq!(rule("mcp__gh__create_issue"), tool("mcp__gh__create_issue"));
        assert_eq!(rule("mcp__gh").mcp_server.as_deref(), Some("gh"));
        assert_eq!(rule("mcp__gh__*").mcp_server.as_deref(), Some("gh"));
        let web = parse("WebFetch(domain:example.com)", bases());
        let no_tool = Unsupported::NoTool("WebFetch".into());
        assert_eq!(web, Ok(Parsed::Unsupported(no_tool)));
        let unknown = RuleError::UnknownTool("Frobnicate".into());
        assert_eq!(parse("Frobnicate(x)", bases()), Err(unknown));
        assert_eq!(parse("Bash(ls", bases()), Err(RuleError::Unclosed));
        assert!(matches!(
            parse("Read([)", bases()),
            Err(RuleError::BadGlob(_))
        ));
    }

    #[test]
    fn a_file_lists_its_rules_and_its_problems_in_order() {
        let file = SettingsFile {
            path: "/p/.claude/settings.json".into(),
            origin: Origin::ClaudeProject,
            value: Ok(serde_json::json!({"permissions": {
                "deny": ["Bash(rm:*)", 3],
                "allow": ["Bash", "WebFetch"],
                "ask": "Bash"
            }})),
            bytes: Vec::new(),
        };
        let bad = SettingsFile {
            path: "/h/.claude/settings.json".into(),
            origin: Origin::ClaudeUser,
            value: Err(crate::project::setup::files::FileProblem::BadJson {
                line: 2,
                column: 1,
                message: "expected value".into(),
            }),
            bytes: Vec::new(),
        };
        let found = setting_rules(&[bad, file], bases());
        let verdicts: Vec<_> = found
            .rules
            .iter()
            .map(|r| (r.verdict, r.text.as_str()))
            .collect();
        assert_eq!(
            verdicts,
            [
                (Verdict::Allow, "Bash"),
                (Verdict::Allow, "WebFetch"),
                (Verdict::Deny, "Bash(rm:*)")
            ]
        );
        assert!(found.rules[1].rule.is_none());
        let messages: Vec<_> = found.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(messages[0].contains("bad JSON at line 2"));
        assert!(messages[1].contains("`permissions.ask` is not a list"));
        assert!(messages[2].contains("`permissions.deny[1]` is not a string"));
    }
}
