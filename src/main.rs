//! The `oml` binary: parse arguments, run the library, map the outcome to an exit code.
//! It is the only place in the crate that exits the process.

fn main() {}
