//! Writing to the terminal from the front ends and the command line without ever panicking:
//! `println!` and `eprintln!` panic when the other end is gone (`oml sessions | head -1` closes
//! stdout after one line), so front ends write through these macros, which drop what cannot be
//! written. Everything else is denied the print macros by the `[lints]` table in Cargo.toml.
//!
//! This module knows nothing of what is written; it is shared by the front ends and `cli`.

use std::fmt;
use std::io::Write as _;

/// Write one line to stdout; a closed or full pipe is ignored (the reader went away).
pub fn out_line(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_fmt(args);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// Write one line to stderr; a closed stderr is ignored.
pub fn err_line(args: fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args);
    let _ = err.write_all(b"\n");
}

/// `println!` that survives a closed stdout.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::front::stdio::out_line(format_args!($($arg)*))
    };
}

/// `eprintln!` that survives a closed stderr.
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::front::stdio::err_line(format_args!($($arg)*))
    };
}

pub(crate) use {err, out};
