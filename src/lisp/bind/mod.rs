//! The Lisp faces of Rust subsystems: each submodule installs one namespace table's functions.

pub mod catalog;
pub mod client;
