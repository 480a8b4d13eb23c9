//! Anthropic's Messages API (`llm.api` `:anthropic`): the request translated from the chat
//! shape ([`request`]), the stream translated back into chat-shaped chunks ([`events`]), and
//! what the two share. The client (`super::client`) posts and reads; the fold, the loop and the
//! transcript are those of every protocol.
//!
//! What must go back verbatim — thinking blocks with their signatures, redacted thinking — is
//! kept in the assistant message under [`THINKING_KEY`]; the chat protocol leaves that field
//! out, so a session that moves to another protocol sends the other side nothing it cannot
//! read.
//!
//! Shapes from Anthropic's documentation (<https://docs.anthropic.com/en/api/messages-streaming>,
//! <https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching>).
//!
//! It knows nothing of the network, Lisp or the agent.

pub mod events;
pub mod request;

/// The field of a stored assistant message holding its thinking blocks, as they arrived.
pub const THINKING_KEY: &str = "thinking_blocks";

/// Sent as `anthropic-version`.
pub const VERSION: &str = "2023-06-01";

/// The base URL when `ANTHROPIC_API_KEY` chooses Anthropic and `ANTHROPIC_BASE_URL` is unset.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// `max_tokens`, which the API requires, unless `llm.extra-body` gives one: the output limit
/// every current Claude model accepts (older 3.x models cap lower; set it there).
pub const DEFAULT_MAX_TOKENS: u64 = 32_000;

/// The environment variables of the Anthropic block of defaults (Claude Code's names).
pub const ENV_API_KEY: &str = "ANTHROPIC_API_KEY";
pub const ENV_BASE_URL: &str = "ANTHROPIC_BASE_URL";
pub const ENV_MODEL: &str = "ANTHROPIC_MODEL";
