//! OpenAI Responses API stream events for the fake model ([`Reply::Events`]), in the shapes
//! OpenAI documents (<https://platform.openai.com/docs/api-reference/responses-streaming>): a
//! reply is `response.created`, output items (added, deltas, done) and `response.completed`.

use serde_json::{Value, json};

use super::fake_model::{Reply, Step};

/// A reasoning item at `index`: its summary streamed, then the item with its encrypted content.
pub fn reasoning(index: u64, summary: &str, encrypted: &str) -> Vec<Step> {
    let item = json!({"type": "reasoning", "id": format!("rs_{index}"),
        "summary": [{"type": "summary_text", "text": summary}], "encrypted_content": encrypted});
    vec![
        added(
            index,
            json!({"type": "reasoning", "id": format!("rs_{index}"), "summary": []}),
        ),
        event(
            "response.reasoning_summary_text.delta",
            json!({"output_index": index,
            "item_id": format!("rs_{index}"), "summary_index": 0, "delta": summary}),
        ),
        done(index, item),
    ]
}

/// A message item at `index`, its text in `pieces`.
pub fn message(index: u64, pieces: &[&str]) -> Vec<Step> {
    let id = format!("msg_{index}");
    let mut steps = vec![added(
        index,
        json!({"type": "message", "id": id, "role": "assistant",
        "content": []}),
    )];
    steps.extend(pieces.iter().map(|piece| {
        event(
            "response.output_text.delta",
            json!({"output_index": index, "item_id": id,
            "content_index": 0, "delta": piece}),
        )
    }));
    steps.push(done(
        index,
        json!({"type": "message", "id": id, "role": "assistant",
        "content": [{"type": "output_text", "text": pieces.concat()}]}),
    ));
    steps
}

/// A function call item at `index`, its arguments in `fragments`.
pub fn call(index: u64, call_id: &str, name: &str, fragments: &[&str]) -> Vec<Step> {
    let id = format!("fc_{index}");
    let item = |arguments: &str| {
        json!({"type": "function_call", "id": id, "call_id": call_id,
        "name": name, "arguments": arguments})
    };
    let mut steps = vec![added(index, item(""))];
    steps.extend(fragments.iter().map(|fragment| {
        event(
            "response.function_call_arguments.delta",
            json!({"output_index": index,
            "item_id": id, "delta": fragment}),
        )
    }));
    steps.push(done(index, item(&fragments.concat())));
    steps
}

/// A whole reply: `response.created`, the items, `response.completed` with usage.
pub fn reply(items: Vec<Vec<Step>>) -> Reply {
    let mut steps = vec![event(
        "response.created",
        json!({"response": {"status": "in_progress"}}),
    )];
    steps.extend(items.into_iter().flatten());
    steps.push(event(
        "response.completed",
        json!({"response": {"status": "completed",
        "usage": {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 20},
            "output_tokens": 6, "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": 36}}}),
    ));
    Reply::Events(steps)
}

/// A reply that only says `text`.
pub fn says(text: &str) -> Reply {
    reply(vec![message(0, &[text])])
}

/// An event of `kind` with `fields`.
pub fn event(kind: &str, mut fields: Value) -> Step {
    fields["type"] = json!(kind);
    Step::Chunk(fields)
}

fn added(index: u64, item: Value) -> Step {
    event(
        "response.output_item.added",
        json!({"output_index": index, "item": item}),
    )
}

fn done(index: u64, item: Value) -> Step {
    event(
        "response.output_item.done",
        json!({"output_index": index, "item": item}),
    )
}
