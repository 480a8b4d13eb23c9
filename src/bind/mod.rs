//! The Lisp surface: each file installs one namespace table's functions and settings, with the
//! Fennel that completes it beside it (`acp.rs` and `acp.fnl`). The subsystems below know
//! nothing of Lisp; the agent loop and the front ends above reach them through these names.

pub mod acp;
pub mod catalog;
pub mod client;
pub mod llm;
pub mod project;
pub mod search;
pub mod session;
