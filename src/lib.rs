//! oml: a programmable coding-agent harness, extended in Fennel.
//!
//! The crate is one library with one binary. `main.rs` only parses arguments and maps results to
//! exit codes; everything else lives here. Module map (see ARCHITECTURE.md):
//!
//! - `acp`: the Agent Client Protocol; `acp::jsonrpc` is the newline-delimited JSON-RPC 2.0
//!   transport shared by oml as agent and oml as client.
//! - `cancel`: the cancellation token shared by one prompt's work.

pub mod acp;
pub mod cancel;
