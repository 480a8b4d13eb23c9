//! Reading the fields of a sub-agent definition, shared by both formats (`agent_md`,
//! `agent_toml`) once a file is a JSON-like map: strings, lists (YAML or TOML lists, or one
//! comma-separated string), tool names mapped to oml's, permission modes, MCP servers, each
//! wrong one a [`Problem`] at its key's line and left out. It knows nothing of files or folders.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::agent_defs::{CLAUDE_MODES, CLAUDE_TOOLS, MAX_DESCRIPTION_CHARS, MAX_LIST, OML_MODES};
use super::skills::{self, Problem};

/// What a parser collects: the file, its text (for a field's line) and the problems so far.
pub(super) struct Fields<'a> {
    pub file: &'a Path,
    pub text: &'a str,
    pub problems: Vec<Problem>,
}

impl Fields<'_> {
    /// A problem at the line of the top-level `key`.
    pub fn problem(&mut self, key: &str, message: String) {
        let line = key_line(self.text, key);
        self.problems.push(Problem {
            file: self.file.to_path_buf(),
            line,
            message,
        });
    }

    /// The problem that makes the whole file unusable, at the line of `key` (1 when absent).
    pub fn fatal(&self, key: &str, message: &str) -> Problem {
        Problem {
            file: self.file.to_path_buf(),
            line: key_line(self.text, key),
            message: message.to_owned(),
        }
    }

    /// The string `key`, or a problem when it is of another type.
    pub fn string(&mut self, map: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
        match map.get(key)? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Value::String(_) | Value::Null => None,
            Value::Number(n) => Some(n.to_string()),
            _ => {
                self.problem(key, format!("`{key}` must be a string; left out"));
                None
            }
        }
    }

    /// The list `key`: a YAML or TOML list of strings, or one string of comma-separated items.
    pub fn list(&mut self, map: &serde_json::Map<String, Value>, key: &str) -> Option<Vec<String>> {
        let items: Vec<String> = match map.get(key)? {
            Value::Null => return None,
            Value::String(s) => s.split(',').map(|i| i.trim().to_owned()).collect(),
            Value::Array(a) if a.iter().all(Value::is_string) => a
                .iter()
                .filter_map(Value::as_str)
                .map(|i| i.trim().to_owned())
                .collect(),
            _ => {
                let m = format!(
                    "`{key}` must be a list of names or one comma-separated string; left out"
                );
                self.problem(key, m);
                return None;
            }
        };
        Some(
            items
                .into_iter()
                .filter(|i| !i.is_empty())
                .take(MAX_LIST)
                .collect(),
        )
    }

    /// The tool list `key`, mapped to oml's names; what cannot be is a problem, left out.
    pub fn tools(
        &mut self,
        map: &serde_json::Map<String, Value>,
        key: &str,
        lines: &mut BTreeMap<String, usize>,
        field: &str,
    ) -> Option<Vec<String>> {
        let names = self.list(map, key)?;
        lines.insert(field.to_owned(), key_line(self.text, key));
        let mut out: Vec<String> = Vec::new();
        for name in names {
            match map_tool(&name) {
                Ok(t) if !out.contains(&t) => out.push(t),
                Ok(_) => {}
                Err(why) => self.problem(key, format!("`{key}`: {why}; left out")),
            }
        }
        Some(out)
    }

    /// The permission mode `key`, as oml's mode id.
    pub fn mode(&mut self, map: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
        let mode = self.string(map, key)?;
        let mapped = CLAUDE_MODES
            .iter()
            .find(|(c, _)| *c == mode)
            .map(|(_, o)| (*o).to_owned())
            .or_else(|| OML_MODES.contains(&mode.as_str()).then_some(mode.clone()));
        if mapped.is_none() {
            let known: Vec<&str> = CLAUDE_MODES.iter().map(|(c, _)| *c).collect();
            let m = format!(
                "unknown `{key}` `{mode}` (one of {}); left out",
                known.join(", ")
            );
            self.problem(key, m);
        }
        mapped
    }

    /// The MCP servers `key`: a list of names, or of one-entry maps name → spec, or (`by_name`)
    /// a map name → spec; each as `{"name": …, …spec}`.
    pub fn mcp_servers(
        &mut self,
        map: &serde_json::Map<String, Value>,
        key: &str,
    ) -> Option<Vec<Value>> {
        let entry = |name: &str, spec: &Value| -> Option<Value> {
            let mut out = spec.as_object()?.clone();
            out.insert("name".into(), Value::String(name.to_owned()));
            Some(Value::Object(out))
        };
        let mut out = Vec::new();
        let mut bad = false;
        match map.get(key)? {
            Value::Null => return None,
            Value::Object(by_name) => {
                for (name, spec) in by_name {
                    match entry(name, spec) {
                        Some(e) => out.push(e),
                        None => bad = true,
                    }
                }
            }
            Value::Array(items) => {
                for item in items {
                    match item {
                        Value::String(name) => out.push(serde_json::json!({ "name": name })),
                        Value::Object(m) if m.len() == 1 => {
                            let (name, spec) = m.iter().next()?;
                            match entry(name, spec) {
                                Some(e) => out.push(e),
                                None => bad = true,
                            }
                        }
                        _ => bad = true,
                    }
                }
            }
            _ => bad = true,
        }
        if bad {
            let m = format!(
                "`{key}`: an entry is neither a server's name nor `name: {{command or url …}}`; left out"
            );
            self.problem(key, m);
        }
        out.truncate(MAX_LIST);
        Some(out)
    }
}

/// Why a tool name in a definition has no oml tool.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolNameError {
    #[error(
        "`{0}` limits a tool to some uses, which a definition cannot do in oml (use permission rules)"
    )]
    Limited(String),
    #[error("unknown tool `{0}`: oml has no tool of that name")]
    Unknown(String),
}

/// `name` as oml's tool name, or why it has none.
pub fn map_tool(name: &str) -> Result<String, ToolNameError> {
    if let Some((_, oml)) = CLAUDE_TOOLS.iter().find(|(c, _)| *c == name) {
        return Ok((*oml).to_owned());
    }
    if name.starts_with("mcp__") && name.len() > 5 {
        return Ok(name.to_owned());
    }
    let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    if name.starts_with(|c: char| c.is_ascii_lowercase()) && name.chars().all(plain) {
        return Ok(name.to_owned());
    }
    if name.contains('(') {
        return Err(ToolNameError::Limited(name.to_owned()));
    }
    Err(ToolNameError::Unknown(name.to_owned()))
}

/// The 1-based line of `text` where the top-level `key` (`key:` or `key =`) is, else 1.
pub fn key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            l.strip_prefix(key).is_some_and(|rest| {
                let rest = rest.trim_start();
                rest.starts_with(':') || rest.starts_with('=')
            })
        })
        .map_or(1, |i| i + 1)
}

/// A definition's name: `named` when given, else the file's stem; checked.
pub(super) fn name_of(fields: &Fields<'_>, named: Option<String>) -> Result<String, Problem> {
    let stem = fields
        .file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = named.unwrap_or(stem);
    if skills::valid_name(&name) {
        Ok(name)
    } else {
        Err(fields.fatal(
            "name",
            "the name may hold letters, digits, `-`, `_`, `.` and `:` only",
        ))
    }
}

/// A definition's description, whitespace collapsed and capped; its absence makes the file
/// unusable (the model could not know when to use the sub-agent).
pub(super) fn description_of(
    fields: &Fields<'_>,
    given: Option<String>,
) -> Result<String, Problem> {
    let d = given
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|d| !d.is_empty())
        .ok_or_else(|| {
            fields.fatal(
                "description",
                "no `description`: the model could not know when to use this sub-agent",
            )
        })?;
    Ok(d.chars().take(MAX_DESCRIPTION_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_map_to_oml_and_unknown_ones_say_why() {
        assert_eq!(map_tool("Glob"), Ok("find".into()));
        assert_eq!(map_tool("MultiEdit"), Ok("edit".into()));
        assert_eq!(
            map_tool("mcp__github__search"),
            Ok("mcp__github__search".into())
        );
        assert_eq!(map_tool("update_plan"), Ok("update_plan".into()));
        assert_eq!(
            map_tool("WebFetch"),
            Err(ToolNameError::Unknown("WebFetch".into()))
        );
        assert_eq!(
            map_tool("Bash(git:*)"),
            Err(ToolNameError::Limited("Bash(git:*)".into()))
        );
        assert!(map_tool("rm -rf").is_err());
    }

    #[test]
    fn a_key_is_found_at_its_line() {
        let text = "---\nname: a\ntools: Read\n---\ntools: in the body\n";
        assert_eq!(key_line(text, "tools"), 3);
        assert_eq!(key_line("a = 1\nsandbox_mode = \"x\"\n", "sandbox_mode"), 2);
        assert_eq!(key_line("x: 1\n", "missing"), 1);
        assert_eq!(key_line("  tools: nested\n", "tools"), 1);
    }
}
