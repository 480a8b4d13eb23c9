//! An MCP server's tools as oml offers them to the model: the name (`mcp__<server>__<tool>`,
//! the convention Claude Code uses, cut to what OpenAI-compatible endpoints accept), the input
//! schema after a sanity check, and the annotations that decide the card's kind and what the
//! permission policy asks.
//!
//! A `tools/list` answer is parsed one tool at a time from JSON, so one malformed tool is
//! skipped with a notice instead of losing the server's whole list. Pure: no I/O.

use serde_json::{Map, Value};

/// Characters a tool name may have at most (OpenAI's function-name limit).
pub const TOOL_NAME_MAX_CHARS: usize = 64;

/// One tool of one server.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTool {
    /// The server's name, as configured.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// The name the model calls it by: `mcp__<server>__<tool>`.
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    /// The JSON schema of its arguments (an object schema).
    pub schema: Value,
    /// `readOnlyHint`: the server says the tool changes nothing.
    pub read_only: bool,
    /// `destructiveHint`: the server says the tool may destroy something. Per the MCP spec it
    /// is only meaningful when the tool is not read-only, and defaults to true.
    pub destructive: bool,
}

impl McpTool {
    /// The ACP tool kind of its cards: `read` for a read-only tool, `delete` for a destructive
    /// one, `other` otherwise.
    pub fn kind(&self) -> &'static str {
        if self.read_only {
            "read"
        } else if self.destructive {
            "delete"
        } else {
            "other"
        }
    }
}

/// `mcp__<server>__<tool>` with every character outside `[A-Za-z0-9_-]` replaced by `_`, cut
/// to [`TOOL_NAME_MAX_CHARS`].
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut name = format!("mcp__{}__{}", clean(server), clean(tool));
    name.truncate(TOOL_NAME_MAX_CHARS);
    name
}

/// What is wrong with an input schema, or `None` when oml can offer it: a JSON object whose
/// `type` (when given) is `"object"`, whose `properties` (when given) is an object of objects,
/// and whose `required` (when given) is a list of strings.
pub fn schema_problem(schema: &Value) -> Option<String> {
    let Some(obj) = schema.as_object() else {
        return Some(format!(
            "its input schema is not an object but {}",
            json_kind(schema)
        ));
    };
    match obj.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Some(format!(
                "its input schema's type is {other}, not \"object\""
            ));
        }
    }
    match obj.get("properties") {
        None => {}
        Some(Value::Object(props)) => {
            if let Some((k, _)) = props
                .iter()
                .find(|(_, v)| !v.is_object() && !v.is_boolean())
            {
                return Some(format!("its input schema's property {k:?} is not a schema"));
            }
        }
        Some(other) => {
            return Some(format!(
                "its input schema's properties are {}, not an object",
                json_kind(other)
            ));
        }
    }
    match obj.get("required") {
        None => None,
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => None,
        Some(_) => Some("its input schema's required is not a list of names".to_owned()),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The tools of `server` in a `tools/list` answer's `tools` list, and a notice for each tool
/// that was skipped (no name, a bad schema, a name another tool already has).
pub fn parse_tools(server: &str, tools: &[Value]) -> (Vec<McpTool>, Vec<String>) {
    let mut out: Vec<McpTool> = Vec::new();
    let mut notices = Vec::new();
    for raw in tools {
        let Some(obj) = raw.as_object() else {
            notices.push(format!(
                "MCP server {server}: skipped a tool that is not an object"
            ));
            continue;
        };
        let Some(tool) = obj
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        else {
            notices.push(format!(
                "MCP server {server}: skipped a tool without a name"
            ));
            continue;
        };
        let schema = obj.get("inputSchema").cloned().unwrap_or(Value::Null);
        if let Some(problem) = schema_problem(&schema) {
            notices.push(format!(
                "MCP server {server}: skipped tool {tool}: {problem}"
            ));
            continue;
        }
        let name = tool_name(server, tool);
        if out.iter().any(|t| t.name == name) {
            notices.push(format!(
                "MCP server {server}: skipped tool {tool}: another tool is already called {name}"
            ));
            continue;
        }
        out.push(describe(server, tool, name, obj, normalise(schema)));
    }
    (out, notices)
}

fn describe(
    server: &str,
    tool: &str,
    name: String,
    obj: &Map<String, Value>,
    schema: Value,
) -> McpTool {
    let annotations = obj.get("annotations").and_then(Value::as_object);
    let hint = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
    };
    let read_only = hint("readOnlyHint").unwrap_or(false);
    let title = obj
        .get("title")
        .and_then(Value::as_str)
        .or_else(|| {
            annotations
                .and_then(|a| a.get("title"))
                .and_then(Value::as_str)
        })
        .map(str::to_owned);
    let description = obj
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    McpTool {
        server: server.to_owned(),
        tool: tool.to_owned(),
        name,
        title,
        description,
        schema,
        read_only,
        destructive: !read_only && hint("destructiveHint").unwrap_or(true),
    }
}

/// The schema with `type: "object"` and `properties` present, as OpenAI-compatible endpoints
/// want them.
fn normalise(schema: Value) -> Value {
    let Value::Object(mut obj) = schema else {
        return schema;
    };
    obj.entry("type")
        .or_insert_with(|| Value::String("object".into()));
    obj.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names() {
        assert_eq!(
            tool_name("github", "create_issue"),
            "mcp__github__create_issue"
        );
        assert_eq!(tool_name("my server", "a.b/c"), "mcp__my_server__a_b_c");
        assert_eq!(tool_name("s", &"x".repeat(100)).len(), TOOL_NAME_MAX_CHARS);
    }

    #[test]
    fn schemas() {
        let cases = [
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}}),
                None,
            ),
            (json!({}), None),
            (json!({"type": "object", "required": ["a"]}), None),
            (json!("nope"), Some("not an object but a string")),
            (json!({"type": "array"}), Some("type is \"array\"")),
            (json!({"properties": 5}), Some("properties are a number")),
            (
                json!({"properties": {"a": 1}}),
                Some("property \"a\" is not a schema"),
            ),
            (json!({"required": [1]}), Some("required is not a list")),
        ];
        for (schema, want) in cases {
            let got = schema_problem(&schema);
            match (want, &got) {
                (None, None) => {}
                (Some(w), Some(g)) => assert!(g.contains(w), "{schema}: {g}"),
                _ => panic!("{schema}: {got:?}"),
            }
        }
    }

    #[test]
    fn listing_skips_bad_tools_and_reads_hints() {
        let tools = [
            json!({"name": "get", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}),
            json!({"name": "put", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": false}}),
            json!({"name": "rm", "description": "remove", "inputSchema": {"type": "object"}}),
            json!({"name": "bad", "inputSchema": {"type": "object", "properties": "x"}}),
            json!({"inputSchema": {}}),
            json!({"name": "get", "inputSchema": {}}),
        ];
        let (ok, notices) = parse_tools("s", &tools);
        let kinds: Vec<(&str, &str)> = ok.iter().map(|t| (t.name.as_str(), t.kind())).collect();
        assert_eq!(
            kinds,
            [
                ("mcp__s__get", "read"),
                ("mcp__s__put", "other"),
                ("mcp__s__rm", "delete")
            ]
        );
        assert_eq!(ok[0].schema, json!({"type": "object", "properties": {}}));
        assert_eq!(notices.len(), 3, "{notices:?}");
        assert!(notices[0].contains("skipped tool bad"));
        assert!(notices[2].contains("already called mcp__s__get"));
    }
}
