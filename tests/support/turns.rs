//! A turn of tool calls as the permission tests script it: a fake model that calls each tool
//! in turn, one call per answer (`call_0`, `call_1`, …), then says "done"; the results the
//! model read back; and the user's or a project's Claude Code permission rules written where
//! oml reads them. The print-mode run itself stays with each test, which sets its own mode,
//! answers and home.

use std::path::Path;

use super::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};

/// A fake model that calls each of `calls` (a tool's name and its arguments as JSON text), one
/// per answer, then answers "done".
pub fn calling<A: AsRef<str>>(calls: &[(&str, A)]) -> FakeModel {
    let mut list: Vec<_> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| tool_call_chunks(&format!("call_{i}"), name, &[args.as_ref()]))
        .collect();
    list.push(text_chunks(&["done"]));
    FakeModel::start(list.into_iter().map(Reply::Stream))
}

/// The result of each of the first `n` tool calls as the model read it: the last message of
/// its requests 1 to `n`.
pub fn results(fake: &FakeModel, n: usize) -> Vec<String> {
    let requests = fake.requests();
    (1..=n)
        .map(|i| {
            let msgs = requests[i].body["messages"].as_array().unwrap();
            msgs.last().unwrap()["content"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// Write `{"permissions": permissions}` to the Claude Code settings file `file`, making its
/// folder.
pub fn write_permissions(file: &Path, permissions: serde_json::Value) {
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let json = serde_json::json!({ "permissions": permissions });
    std::fs::write(file, json.to_string()).unwrap();
}
