//! Google's Gemini API (`llm.api` `:gemini`): the request translated from the chat shape
//! ([`request`], with the tools' schemas converted to the subset Gemini accepts, [`schema`])
//! and the stream translated back into chat-shaped chunks ([`events`]). Thinking models sign
//! their turns: each part's `thoughtSignature` is kept in the assistant message under
//! [`SIGNATURES_KEY`] and returned on the same part on the next request, as Gemini requires for
//! function calling.
//!
//! Shapes from Google's documentation (<https://ai.google.dev/api/generate-content>,
//! <https://ai.google.dev/gemini-api/docs/thought-signatures>).
//!
//! It knows nothing of the network, Lisp or the agent.

pub mod events;
pub mod request;
pub mod schema;

/// The field of a stored assistant message holding its thought signatures: `{"text": <the
/// text's signature or null>, "calls": [<each call's signature or null>]}`.
pub const SIGNATURES_KEY: &str = "thought_signatures";

/// The base URL when `GEMINI_API_KEY` chooses Gemini and `GOOGLE_GEMINI_BASE_URL` is unset.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// The environment variables of the Gemini block of defaults (the Gemini CLI's names).
pub const ENV_API_KEY: &str = "GEMINI_API_KEY";
pub const ENV_BASE_URL: &str = "GOOGLE_GEMINI_BASE_URL";
pub const ENV_MODEL: &str = "GEMINI_MODEL";
