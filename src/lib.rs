//! oml: a programmable coding-agent harness, extended in Fennel.
//!
//! The crate is one library with one binary. `main.rs` only parses arguments and maps results to
//! exit codes; everything else lives here. Module map (see ARCHITECTURE.md):
//!
//! - `cancel`: the cancellation token shared by one prompt's work.
//! - `tools`: the built-in tools `read`, `write`, `edit` and `bash`, with path resolution and
//!   output truncation.

pub mod cancel;
pub mod tools;
