//! OpenAI's Responses API (`llm.api` `:responses`): the request translated from the chat shape
//! ([`request`]) and the stream translated back into chat-shaped chunks ([`events`]). Reasoning
//! models keep their reasoning across tool calls only here: each reasoning item comes back with
//! its `encrypted_content` (the request asks for it and sets `store: false`), is kept in the
//! assistant message under [`ITEMS_KEY`], and is sent back verbatim on the next request.
//!
//! Shapes from OpenAI's documentation (<https://platform.openai.com/docs/api-reference/responses>,
//! <https://platform.openai.com/docs/guides/reasoning>).
//!
//! It knows nothing of the network, Lisp or the agent.

pub mod events;
pub mod request;

/// The field of a stored assistant message holding its reasoning items, as they arrived.
pub const ITEMS_KEY: &str = "reasoning_items";

/// Model id prefixes of OpenAI's reasoning models, which `:auto` sends to the Responses API on
/// api.openai.com and whose encrypted reasoning is asked for.
const REASONING_PREFIXES: [&str; 5] = ["o1", "o3", "o4", "gpt-5", "codex"];

/// Whether `model` is one of OpenAI's reasoning models.
pub fn reasoning_model(model: &str) -> bool {
    let model = model.rsplit('/').next().unwrap_or(model);
    REASONING_PREFIXES
        .iter()
        .any(|prefix| model.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reasoning_models_by_prefix() {
        for model in ["o3", "o4-mini", "gpt-5", "gpt-5.1-codex", "openai/o3-pro"] {
            assert!(super::reasoning_model(model), "{model}");
        }
        for model in ["gpt-4o", "gpt-4.1-mini", "claude-sonnet-4"] {
            assert!(!super::reasoning_model(model), "{model}");
        }
    }
}
