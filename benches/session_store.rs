//! The session store (run with `cargo bench --bench session_store`):
//!
//! - `append`: queueing one message entry (serialising it and sending it to the writer thread,
//!   which writes it at once), the cost the loop pays per message;
//! - `append_and_flush`: one entry written and fsynced, the end-of-turn cost when a turn adds one
//!   entry;
//! - `line_sized` against `line_grown_baseline`: encoding one session line into a buffer of
//!   exactly its size (counted first) against the former single encoding into a growing buffer,
//!   for a typical message and for a 20 MB `write`;
//! - `load_10k`: reading back a session of 10 000 messages (about 300 bytes each) and rebuilding
//!   its transcript, with divan's allocation profiler counting the bytes allocated;
//! - `list_100`: `session/list` over 100 sessions.
//!
//! Since the writer keeps what the disk refuses (src/session/writer.rs), the same run against
//! the writer before it (2026-12-01, both binaries alternated three times, medians): `append`
//! 0.70-16.8 µs before and 0.70-16.8 µs after (bimodal in both: whether the writer thread is
//! awake), 16.84 µs vs 16.81 µs in the same mode (1.00x); `append_and_flush` 3.65-3.97 ms before
//! and 3.97-3.99 ms after (1.00-1.09x, the shared disk's fsync; the writer adds no system call:
//! one write per line as before, no BufWriter).
//!
//! Measured 2026-11-30 on the shared 2-core build machine (release): `append` 14 µs median
//! (13 allocations, ~0.9 KB); `append_and_flush` 156 µs median (the fsync); `load_10k` 35 ms
//! median for a 2.85 MB file (~81 MB/s), 24 MB allocated in total and 23.6 MB live at the peak
//! (the parsed entries plus the rebuilt transcript); `list_100` 0.83 ms.

#![allow(clippy::print_stdout, clippy::print_stderr)] // test and tool output

use std::path::Path;

use divan::{AllocProfiler, Bencher};
use oml::session::entry::{Entry, Stamped};
use oml::session::store::Store;
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

fn main() {
    divan::main();
}

fn message(i: usize) -> Value {
    match i % 3 {
        0 => json!({"role": "user", "content": format!("question {i}: {}", "words ".repeat(35))}),
        1 => {
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{i}"),
            "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"src/main.rs\"}"}}]})
        }
        _ => json!({"role": "tool", "tool_call_id": format!("call_{}", i - 1),
            "content": format!("     1\t{}", "fn main() {} ".repeat(18))}),
    }
}

#[divan::bench]
fn append(bencher: Bencher) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    let log = store.create("bench", Path::new("/p")).unwrap();
    let msg = message(0);
    bencher.bench_local(|| log.message(divan::black_box(&msg)));
    log.flush_blocking();
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn append_and_flush(bencher: Bencher) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    let log = store.create("bench", Path::new("/p")).unwrap();
    let msg = message(0);
    bencher.bench_local(|| {
        log.message(&msg);
        log.flush_blocking();
    });
}

/// A session line as `Entry::to_line` wrote it before it sized its buffer (one encoding into a
/// growing buffer, then a shrink): the baseline of `line_sized`, in the same run.
fn line_grown(entry: &Entry) -> Vec<u8> {
    let mut line = serde_json::to_vec(&Stamped { entry, at: 1.5 }).unwrap();
    line.shrink_to_fit();
    line.push(b'\n');
    line
}

/// The entries the two line benchmarks encode: a typical message, and a `write` of 20 MB.
fn line_entry(kind: &str) -> Entry {
    let message = match kind {
        "typical" => message(0),
        _ => json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_w",
            "type": "function", "function": {"name": "write",
            "arguments": json!({"path": "big.txt", "content": "y".repeat(20 << 20)}).to_string()}}]}),
    };
    Entry::Message { message }
}

#[divan::bench(args = ["typical", "20MB"], sample_count = 20)]
fn line_grown_baseline(bencher: Bencher, kind: &str) {
    let entry = line_entry(kind);
    bencher.bench_local(|| divan::black_box(line_grown(&entry)));
}

#[divan::bench(args = ["typical", "20MB"], sample_count = 20)]
fn line_sized(bencher: Bencher, kind: &str) {
    let entry = line_entry(kind);
    bencher.bench_local(|| divan::black_box(entry.to_line(1.5).unwrap()));
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn load_10k(bencher: Bencher) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    let log = store.create("big", Path::new("/p")).unwrap();
    for i in 0..10_000 {
        log.message(&message(i));
    }
    log.flush_blocking();
    let size = std::fs::metadata(store.path("big")).unwrap().len();
    eprintln!("10k-message session file: {size} bytes");
    bencher
        .counter(divan::counter::BytesCount::new(size))
        .bench_local(|| {
            let loaded = store.load("big").unwrap();
            divan::black_box(loaded.transcript().len())
        });
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn list_100(bencher: Bencher) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    for s in 0..100 {
        let log = store.create(&format!("s{s}"), Path::new("/p")).unwrap();
        for i in 0..30 {
            log.message(&message(i));
        }
        log.flush_blocking();
    }
    bencher.bench_local(|| divan::black_box(store.list(Some(Path::new("/p"))).len()));
}
