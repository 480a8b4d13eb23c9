//! Benchmarks for the built-in tools on large inputs: `read` of a window in the middle of a
//! 50 MB file, `edit` of a 10 MB file (including its fsync), and `bash` producing 10 MB of output.
//!
//! Run with `cargo bench -j 1 --bench tools`. Peak memory is measured separately by
//! `cargo run --release --example tool_memory`, because criterion's own allocations would blur it.

use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use oml::cancel::CancelToken;
use oml::tools::{self, Edit, ReadLimits};

#[path = "support/fixtures.rs"]
mod fixtures;
use fixtures::numbered_file;

fn fixture(dir: &tempfile::TempDir, name: &str, bytes: usize) -> (PathBuf, u64) {
    let path = dir.path().join(name);
    let lines = numbered_file(&path, bytes);
    (path, lines)
}

fn read_window(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (path, lines) = fixture(&dir, "50mb.txt", 50 * 1024 * 1024);
    let middle = i64::try_from(lines / 2).unwrap_or(i64::MAX);
    let limits = ReadLimits::default();
    c.bench_function(
        "read: 2000-line window in the middle of a 50 MB file",
        |b| {
            b.iter(|| {
                let out = tools::read(&path, Some(middle), None, &limits);
                assert!(!out.is_error);
                out
            })
        },
    );
}

fn edit_large(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (path, lines) = fixture(&dir, "10mb.txt", 10 * 1024 * 1024);
    let target = format!("line {:>9}: the quick", lines / 2);
    let swapped = target.replace("quick", "QUICK");
    let forth = [Edit {
        old_text: target.clone(),
        new_text: swapped.clone(),
    }];
    let back = [Edit {
        old_text: swapped,
        new_text: target,
    }];
    let mut flip = false;
    c.bench_function(
        "edit: one line in the middle of a 10 MB file (atomic, fsync)",
        |b| {
            b.iter(|| {
                flip = !flip;
                let out = tools::edit(&path, if flip { &forth } else { &back });
                assert!(!out.is_error, "{}", out.content);
                out
            })
        },
    );
}

fn bash_output(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let cancel = CancelToken::new();
    c.bench_function("bash: 10 MB of output, tail kept", |b| {
        b.iter(|| {
            runtime.block_on(tools::bash(
                "head -c 10000000 /dev/zero | tr '\\0' 'x'",
                dir.path(),
                tools::BASH_TIMEOUT,
                tools::BASH_MAX_CHARS,
                &cancel,
            ))
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = read_window, edit_large, bash_output
}
criterion_main!(benches);
