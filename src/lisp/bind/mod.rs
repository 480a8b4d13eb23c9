//! The Lisp faces of Rust subsystems: each submodule installs one namespace table's functions
//! and settings. The Rust modules themselves know nothing of Lisp.

pub mod catalog;
pub mod client;
pub mod llm;
