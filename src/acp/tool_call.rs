//! What a client shows of a tool call an agent asks about: the command it runs
//! (`rawInput.command`, a line or a list of words, and `rawInput.cwd`) and the diffs of its
//! content (v1's `{type: "diff", path, oldText, newText}`), read leniently with serde (a member
//! of another type counts as absent).
//!
//! It knows the shapes, not how they are shown.

use serde::Deserialize;
use serde_json::Value;

use super::Loose;

/// The parts of a tool call shown with a question.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallShown {
    #[serde(default)]
    raw_input: Loose<RawInput>,
    #[serde(default)]
    content: Loose<Vec<Value>>,
}

#[derive(Debug, Default, Deserialize)]
struct RawInput {
    #[serde(default)]
    command: Loose<Command>,
    #[serde(default)]
    cwd: Loose<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Command {
    Line(String),
    Words(Vec<Value>),
}

/// One diff of a tool call's content: `old` is `None` for a new file.
#[derive(Debug, PartialEq, Eq)]
pub struct Diff {
    pub path: Option<String>,
    pub old: Option<String>,
    pub new: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DiffWire {
    #[serde(rename = "type", default)]
    kind: Loose<String>,
    #[serde(default)]
    path: Loose<String>,
    #[serde(default)]
    old_text: Loose<String>,
    #[serde(default)]
    new_text: Loose<String>,
}

impl ToolCallShown {
    /// The shown parts of `tool_call` (none of them when it is not an object).
    pub fn of(tool_call: &Value) -> ToolCallShown {
        ToolCallShown::deserialize(tool_call).unwrap_or_default()
    }

    /// The command, its words joined by spaces, and the folder it runs in.
    pub fn command(&self) -> (Option<String>, Option<&str>) {
        let Some(input) = &self.raw_input.0 else {
            return (None, None);
        };
        let command = match &input.command.0 {
            Some(Command::Line(line)) => Some(line.clone()),
            Some(Command::Words(words)) => Some(
                words
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            None => None,
        };
        (command, input.cwd.0.as_deref())
    }

    /// The content's diffs, in order.
    pub fn diffs(&self) -> Vec<Diff> {
        let items = self.content.0.iter().flatten();
        items
            .filter_map(|item| DiffWire::deserialize(item).ok())
            .filter(|d| d.kind.0.as_deref() == Some("diff"))
            .map(|d| Diff {
                path: d.path.0,
                old: d.old_text.0,
                new: d.new_text.0,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn commands_and_diffs_are_read_leniently() {
        let call = json!({"rawInput": {"command": ["git", 3, "commit"], "cwd": 7},
            "content": [{"type": "diff", "path": "/a", "oldText": null, "newText": "x"},
                        {"type": "content", "content": {}}, 5]});
        let shown = ToolCallShown::of(&call);
        assert_eq!(shown.command(), (Some("git commit".to_owned()), None));
        assert_eq!(
            shown.diffs(),
            vec![Diff {
                path: Some("/a".into()),
                old: None,
                new: Some("x".into())
            }]
        );
        let none = ToolCallShown::of(&json!("no"));
        assert_eq!(none.command(), (None, None));
        assert!(none.diffs().is_empty());
    }
}
