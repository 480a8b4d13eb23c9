//! Input files for the tool benchmarks, shared by `benches/tools.rs` and
//! `examples/tool_memory.rs` (each includes this file by path).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// A text file of about `bytes` bytes of numbered lines; its line count.
pub fn numbered_file(path: &Path, bytes: usize) -> u64 {
    let mut out = BufWriter::new(File::create(path).expect("creating the fixture"));
    let (mut written, mut lines) = (0, 0u64);
    while written < bytes {
        lines += 1;
        let line = format!("line {lines:>9}: the quick brown fox jumps over the lazy dog\n");
        out.write_all(line.as_bytes()).expect("writing the fixture");
        written += line.len();
    }
    out.flush().expect("flushing the fixture");
    lines
}
