//! oml: a programmable coding-agent harness, extended in Fennel.
//!
//! The crate is one library with one binary. `main.rs` only parses arguments and maps results to
//! exit codes; everything else lives here. Module map (see ARCHITECTURE.md):
//!
//! - `cancel`: the cancellation token shared by one prompt's work.
//! - `llm`: the model client (streaming OpenAI-compatible chat completions: SSE decoding, delta
//!   folding, retries, timeouts, cancellation).

pub mod cancel;
pub mod llm;
