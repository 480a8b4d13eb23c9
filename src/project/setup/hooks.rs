//! The hooks the settings files declare, typed: Claude Code's shape, which Codex's `hooks.json`
//! shares — `{"hooks": {EVENT: [{"matcher": REGEX, "hooks": [HANDLER, …]}, …]}}`, a handler
//! `{"type": "command", "command", "timeout"}` or `{"type": "http", "url", "headers",
//! "timeout"}`. A handler of another type (Claude's `prompt` and `agent`) is kept as
//! unsupported so it can be listed; a malformed entry is a problem naming its place.
//!
//! It knows nothing of which events oml has a moment for, nor of running anything.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::files::{Origin, SettingsFile};

/// One matcher group: the handlers an event runs when its matcher matches.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct HookGroup {
    /// The event's name as written (`PreToolUse`, …).
    pub event: String,
    /// A regular expression on the tool name (or the event's own subject); `None` or empty
    /// matches everything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    pub handlers: Vec<Handler>,
    pub source: PathBuf,
    pub origin: Origin,
    /// Where in the file: `hooks.PreToolUse[0]`.
    pub place: String,
}

/// What a hook runs.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Handler {
    /// A shell command, given the event as JSON on stdin.
    #[serde(rename_all = "kebab-case")]
    Command {
        command: String,
        /// Seconds; `None` for the default.
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout: Option<f64>,
        /// Secret variables the hook asks to keep by name (`keepEnv`, oml's addition): the
        /// rest of the scrubbed environment's secrets stay out.
        keep_env: Vec<String>,
    },
    /// An HTTP endpoint the event is POSTed to as JSON.
    #[serde(rename_all = "kebab-case")]
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout: Option<f64>,
    },
    /// A handler type oml does not run (Claude Code's `prompt` and `agent`).
    Unsupported { kind: String },
}

/// What is wrong in one matcher group or handler.
#[derive(Debug, thiserror::Error)]
pub enum EntryProblem {
    #[error("`matcher` is not a string")]
    Matcher,
    #[error("no `hooks` list of handlers")]
    NoHandlers,
    #[error("`timeout` is not a positive number of seconds")]
    Timeout,
    #[error("a command hook without `command`")]
    NoCommand,
    #[error("`keepEnv` is not a list of names")]
    KeepEnv,
    #[error("an http hook without `url`")]
    NoUrl,
    #[error("`headers` is not an object of strings")]
    Headers,
    #[error("hooks[{index}]: {problem}")]
    Handler {
        index: usize,
        problem: Box<EntryProblem>,
    },
}

/// Something wrong in a file's hooks, with its file and place.
#[derive(Debug, Serialize)]
pub struct Problem {
    pub source: PathBuf,
    pub message: String,
}

/// The hook groups of `files`, in file order, and what was wrong in them. A file that could
/// not be read is not a hooks problem (it is listed with its own).
pub fn hook_groups(files: &[SettingsFile]) -> (Vec<HookGroup>, Vec<Problem>) {
    let mut groups = Vec::new();
    let mut problems = Vec::new();
    for file in files {
        let Ok(value) = &file.value else { continue };
        let Some(hooks) = value.get("hooks") else {
            continue;
        };
        let mut problem = |message: String| {
            problems.push(Problem {
                source: file.path.clone(),
                message,
            })
        };
        let Some(events) = hooks.as_object() else {
            problem("`hooks` is not an object of events".into());
            continue;
        };
        for (event, list) in events {
            let Some(list) = list.as_array() else {
                problem(format!("hooks.{event} is not a list of matcher groups"));
                continue;
            };
            for (i, entry) in list.iter().enumerate() {
                let place = format!("hooks.{event}[{i}]");
                match group(entry) {
                    Ok((matcher, handlers)) => groups.push(HookGroup {
                        event: event.clone(),
                        matcher,
                        handlers,
                        source: file.path.clone(),
                        origin: file.origin,
                        place,
                    }),
                    Err(why) => problem(format!("{place}: {why}")),
                }
            }
        }
    }
    (groups, problems)
}

/// One matcher group's matcher and handlers.
fn group(entry: &Value) -> Result<(Option<String>, Vec<Handler>), EntryProblem> {
    let matcher = match entry.get("matcher") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(m.clone()),
        Some(_) => return Err(EntryProblem::Matcher),
    };
    let Some(list) = entry.get("hooks").and_then(Value::as_array) else {
        return Err(EntryProblem::NoHandlers);
    };
    let handlers = list
        .iter()
        .enumerate()
        .map(|(index, h)| {
            handler(h).map_err(|problem| EntryProblem::Handler {
                index,
                problem: Box::new(problem),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((matcher, handlers))
}

fn handler(h: &Value) -> Result<Handler, EntryProblem> {
    let timeout = match h.get("timeout") {
        None | Some(Value::Null) => None,
        Some(t) => match t.as_f64() {
            Some(s) if s > 0.0 && s.is_finite() => Some(s),
            _ => return Err(EntryProblem::Timeout),
        },
    };
    let text = |key: &str| h.get(key).and_then(Value::as_str).map(str::to_owned);
    match h.get("type").and_then(Value::as_str).unwrap_or("command") {
        "command" => Ok(Handler::Command {
            command: text("command").ok_or(EntryProblem::NoCommand)?,
            timeout,
            keep_env: strings(h.get("keepEnv")).ok_or(EntryProblem::KeepEnv)?,
        }),
        "http" => Ok(Handler::Http {
            url: text("url").ok_or(EntryProblem::NoUrl)?,
            headers: match h.get("headers") {
                None | Some(Value::Null) => BTreeMap::new(),
                Some(v) => serde_json::from_value(v.clone()).map_err(|_| EntryProblem::Headers)?,
            },
            timeout,
        }),
        other => Ok(Handler::Unsupported { kind: other.into() }),
    }
}

/// A list of strings (an absent one is empty); `None` when it is something else.
fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    match v {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(v) => serde_json::from_value(v.clone()).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(json: &str) -> SettingsFile {
        SettingsFile {
            path: "/p/.claude/settings.json".into(),
            origin: Origin::ClaudeProject,
            value: Ok(serde_json::from_str(json).unwrap()),
            bytes: json.as_bytes().to_vec(),
        }
    }

    #[test]
    fn groups_are_typed_and_a_malformed_one_is_a_problem_at_its_place() {
        let (groups, problems) = hook_groups(&[file(
            r#"{"hooks": {
                "PreToolUse": [
                    {"matcher": "Bash|Edit", "hooks": [{"type": "command", "command": "guard", "timeout": 5}]},
                    {"matcher": "Bash", "hooks": [{"type": "command"}]}
                ],
                "Stop": [{"hooks": [{"type": "prompt", "prompt": "done?"},
                                    {"type": "http", "url": "http://h/x", "headers": {"A": "b"}}]}]
            }}"#,
        )]);
        assert_eq!(groups.len(), 2, "{groups:?}");
        assert_eq!(groups[0].matcher.as_deref(), Some("Bash|Edit"));
        assert!(matches!(
            &groups[0].handlers[0],
            Handler::Command { command, timeout: Some(5.0), .. } if command == "guard"
        ));
        assert!(
            matches!(&groups[1].handlers[0], Handler::Unsupported { kind } if kind == "prompt")
        );
        assert!(matches!(&groups[1].handlers[1], Handler::Http { url, .. } if url == "http://h/x"));
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].message.contains("hooks.PreToolUse[1]")
                && problems[0].message.contains("without `command`"),
            "{problems:?}"
        );
    }
}
