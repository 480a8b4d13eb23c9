//! The Agent Client Protocol (ACP) layers: oml as an ACP agent serving an editor, and oml as an
//! ACP client driving agent subprocesses.
//!
//! Both sides share one transport, [`jsonrpc`]: newline-delimited JSON-RPC 2.0 with an ordered
//! writer and per-request routing of answers. The transport moves messages and knows no ACP
//! method; the agent and client layers above it give the methods their meaning.
//!
//! Compare with pi: pi is not an ACP agent; its nearest surface is RPC mode (`docs/rpc.md`),
//! strictly LF-delimited JSONL with its own commands. Compare with oml.clj: `oml.acp` (agent) and
//! the client layer over the official Java SDK, both replaced here by one Rust transport.

pub mod agent;
pub mod client;
pub mod jsonrpc;
