//! What the tests read of the requests the fake model received (roles, tool names, tool
//! results) and the replies they script for it (several tool calls in one message).

use serde_json::{Value, json};

use crate::support::fake_model::{Reply, Step, delta_chunk};

/// The roles of a recorded request's messages.
pub fn roles(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// The text of each user message of a request `body`, in order (text messages only).
pub fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

pub fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

pub fn tool_messages(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

/// One assistant message with several tool calls `(id, name, arguments)`.
pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Vec<Step> {
    let list: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, name, args))| {
            json!({"index": i, "id": id, "type": "function",
                   "function": {"name": name, "arguments": args}})
        })
        .collect();
    vec![
        Step::Chunk(delta_chunk(
            json!({"role": "assistant", "content": null, "tool_calls": list}),
            None,
        )),
        Step::Chunk(delta_chunk(json!({}), Some("tool_calls"))),
    ]
}

pub fn replies(list: Vec<Vec<Step>>) -> Vec<Reply> {
    list.into_iter().map(Reply::Stream).collect()
}
