//! The terminal chat as a person meets it, the release binary on a pseudo-terminal against the
//! fake model (real TCP, real SSE), printed as plain text:
//!
//! 1. Start-up: from spawning `oml --no-init` to its prompt `› ` on the terminal, the median of
//!    [`STARTS`] runs, against the wall time of `oml --no-init eval nil` (boot, one form, exit)
//!    measured in the same run. The difference is what the chat adds before it can read: the
//!    chat's Lisp surface, a session, the line editor and its history, completion names.
//! 2. Render throughput: one answer of [`STREAM_CHARS`] characters of Markdown-ish text in
//!    64 KiB pieces, from the moment the model request arrives to the moment its last character
//!    is on the terminal, in characters per second.
//! 3. Resident memory: `VmRSS` of the chat after its first turn and after [`TURNS`] turns, each
//!    a typed prompt answered by a short reply.
//!
//! The terminal here is a bare pseudo-terminal whose reader only keeps the bytes (and answers
//! the cursor position query the line editor asks at each prompt): `tests/support/pty.rs` feeds
//! every byte through a terminal emulator, which would measure the emulator, not the chat.
//!
//! Run with `cargo bench --bench chat -j 1`. Linux only.
//!
//! Measured on the shared 2-core build machine, with a load average around 3 from other work,
//! over several runs (each figure the range of the runs' medians):
//!
//! - start-up: to the prompt 7.2–16.7 ms, `eval nil` 7.1–11.4 ms, a difference of +0.0 to
//!   +5.5 ms that follows the load (+0.0–0.6 ms in the calmer runs). The CPU time to the
//!   prompt, 7.2–8.7 ms, is that of `eval nil` (7.3–9.3 ms): the chat does no more work before
//!   it reads; what it adds under load is waiting to be scheduled (the line editor's thread,
//!   the session's writer, the cursor position round trip). Before a new session's header was
//!   fsynced with its first flush rather than on creation, the difference was +2.2–3.4 ms in
//!   calm runs and +10 ms under load.
//! - throughput: 2 M characters in 106–232 ms, 8.6–18.9 M characters/s.
//! - memory: 13.3–13.7 MB after the first turn, 14.7–15.1 MB after 200 (+1.3–1.4 MB); a turn
//!   (type, request, stream, status line, prompt) takes 4–12 ms.

#![allow(clippy::print_stdout, clippy::print_stderr)] // test and tool output

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

// The pseudo-terminal's opening and the child's terminal set-up are the test harness's; only
// its emulator is left out here (see above).
#[path = "../tests/support/pty.rs"]
#[allow(dead_code)]
mod pty;

#[path = "../tests/support/fake_model.rs"]
#[allow(dead_code)]
mod fake_model;

use fake_model::{FakeModel, Reply, text_chunks};

/// Start-up samples of each kind.
const STARTS: usize = 30;
/// Characters of the streamed answer.
const STREAM_CHARS: usize = 2_000_000;
/// Characters per streamed piece.
const PIECE_CHARS: usize = 64 * 1024;
/// Turns of the memory run.
const TURNS: usize = 200;
/// Only a hang reaches it.
const DEADLINE: Duration = Duration::from_secs(120);
const PROMPT: &[u8] = "› ".as_bytes();

fn main() {
    let home = tempfile::Builder::new()
        .prefix("oml-bench-chat")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let fake = FakeModel::start(Vec::<Reply>::new());
    let env = Env {
        root: home.path().to_owned(),
        base_url: fake.base_url(),
    };

    let starts = start_up(&env);
    println!("start-up, median of {STARTS} runs each (min .. max):");
    println!("  oml --no-init to the prompt  {}", summary(&starts.chat));
    println!("  oml --no-init eval nil       {}", summary(&starts.eval));
    println!(
        "  difference                   {:+.2} ms (target: chat <= 15 ms, within 2 ms of eval)",
        ms(median(&starts.chat)) - ms(median(&starts.eval))
    );
    println!(
        "  CPU time: chat to the prompt {}, eval nil {}",
        summary(&starts.chat_cpu),
        summary(&starts.eval_cpu)
    );

    let (chars, took) = throughput(&env, &fake);
    println!(
        "render throughput: {chars} characters in {:.1} ms from the request to the last one on the \
         terminal: {:.2} M chars/s (target >= 1 M chars/s)",
        ms(took),
        chars as f64 / took.as_secs_f64() / 1e6
    );

    let (first, last, per_turn) = memory(&env, &fake);
    println!(
        "resident memory (VmRSS): {first} kB after the first turn, {last} kB after {TURNS} turns \
         ({:+} kB); {:.2} ms per turn",
        last as i64 - first as i64,
        ms(per_turn)
    );
}

/// Where the chat runs: a throw-away home, pointed at the fake model.
struct Env {
    root: std::path::PathBuf,
    base_url: String,
}

impl Env {
    fn command(&self, args: &[&str]) -> Command {
        let dir = |name: &str| {
            let p = self.root.join(name);
            std::fs::create_dir_all(&p).expect("create dir");
            p
        };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_oml"));
        cmd.args(args)
            .current_dir(dir("project"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir("home"))
            .env("XDG_CONFIG_HOME", dir("config"))
            .env("XDG_STATE_HOME", dir("state"))
            .env("XDG_CACHE_HOME", dir("cache"))
            .env("XDG_RUNTIME_DIR", dir("run"))
            .env("TERM", "xterm-256color")
            .env("OPENAI_BASE_URL", &self.base_url)
            .env("OPENAI_MODEL", "fake/model")
            .env("OPENAI_API_KEY", "bench-key");
        cmd
    }
}

/// Wall and CPU times of one start of each kind.
#[derive(Default)]
struct Starts {
    chat: Vec<Duration>,
    eval: Vec<Duration>,
    chat_cpu: Vec<Duration>,
    eval_cpu: Vec<Duration>,
}

fn start_up(env: &Env) -> Starts {
    let mut starts = Starts::default();
    // One of each first, unmeasured: the page cache, the compiled-Fennel cache.
    for i in 0..=STARTS {
        let started = Instant::now();
        let pty = Pty::spawn(env.command(&["--no-init"]), 50, 200);
        pty.wait_for(PROMPT, 0);
        let to_prompt = started.elapsed();
        let cpu = cpu_time(pty.pid());
        pty.close();

        let started = Instant::now();
        let child = env
            .command(&["--no-init", "eval", "nil"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("run oml eval");
        let eval_cpu = wait_with_cpu_time(child);
        let took = started.elapsed();
        if i > 0 {
            starts.chat.push(to_prompt);
            starts.eval.push(took);
            starts.chat_cpu.push(cpu);
            starts.eval_cpu.push(eval_cpu);
        }
    }
    starts
}

/// The CPU time the threads of process `pid` have run so far (`/proc/<pid>/task/*/schedstat`,
/// in nanoseconds): a figure the other load of a shared machine hardly moves.
fn cpu_time(pid: u32) -> Duration {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads");
    let ns: u64 = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
}

/// Wait for `child`; the user and system CPU time it took (`wait4`'s resource usage).
fn wait_with_cpu_time(child: Child) -> Duration {
    let pid = i32::try_from(child.id()).expect("a pid");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 reaps our own child and writes its status and usage into values we own.
    let done = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(done, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "oml eval nil failed: {status}"
    );
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Markdown-ish text of about `chars` characters, in pieces, ending with a marker line.
fn markdown(chars: usize) -> (Vec<String>, String) {
    let block = "## A heading\nSome **bold** words, some `code`, and plain text after them.\n\
                 - a bullet with *emphasis*\n- another bullet\n```rust\nlet x = 1;\n```\n";
    let marker = "END-OF-THE-ANSWER-7f3a".to_owned();
    let mut text = String::with_capacity(chars + block.len());
    while text.len() + block.len() + marker.len() < chars {
        text.push_str(block);
    }
    text.push_str(&"x".repeat(chars - text.len() - marker.len()));
    text.push_str(&marker);
    let pieces = text
        .as_bytes()
        .chunks(PIECE_CHARS)
        .map(|c| String::from_utf8(c.to_vec()).expect("ASCII"))
        .collect();
    (pieces, marker)
}

fn throughput(env: &Env, fake: &FakeModel) -> (usize, Duration) {
    let (pieces, marker) = markdown(STREAM_CHARS);
    let chars: usize = pieces.iter().map(String::len).sum();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let before = fake.requests().len();
    fake.push(Reply::Stream(text_chunks(&refs)));
    let pty = Pty::spawn(env.command(&["--no-init"]), 50, 200);
    let from = pty.wait_for(PROMPT, 0);
    pty.type_line("stream a long answer");
    fake.wait_for_requests(before + 1, DEADLINE);
    let requested = Instant::now();
    let end = pty.wait_for(marker.as_bytes(), from);
    let took = requested.elapsed();
    pty.wait_for(PROMPT, end);
    pty.close();
    (chars, took)
}

fn memory(env: &Env, fake: &FakeModel) -> (u64, u64, Duration) {
    for n in 0..TURNS {
        fake.push(Reply::Stream(text_chunks(&[
            "Answer ",
            &format!("number {n}."),
        ])));
    }
    let pty = Pty::spawn(env.command(&["--no-init"]), 50, 200);
    let mut at = pty.wait_for(PROMPT, 0);
    let mut first = 0;
    let mut started = Instant::now();
    for n in 0..TURNS {
        pty.type_line(&format!("question {n}"));
        at = pty.wait_for(format!("number {n}.").as_bytes(), at);
        at = pty.wait_for(PROMPT, at);
        if n == 0 {
            first = rss_kb(pty.pid());
            started = Instant::now();
        }
    }
    let per_turn = started.elapsed() / (TURNS as u32 - 1);
    let last = rss_kb(pty.pid());
    pty.close();
    (first, last, per_turn)
}

/// `VmRSS` of process `pid` in kB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn summary(samples: &[Duration]) -> String {
    let min = samples.iter().min().copied().unwrap_or_default();
    let max = samples.iter().max().copied().unwrap_or_default();
    format!(
        "{:7.2} ms ({:.2} .. {:.2})",
        ms(median(samples)),
        ms(min),
        ms(max)
    )
}

// --- a bare pseudo-terminal

/// A program on a pseudo-terminal whose output is kept as bytes.
struct Pty {
    master: File,
    child: Child,
    shared: Arc<Shared>,
}

struct Shared {
    out: Mutex<Output>,
    changed: Condvar,
}

#[derive(Default)]
struct Output {
    bytes: Vec<u8>,
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Output> {
        self.out.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Pty {
    fn spawn(mut cmd: Command, rows: u16, cols: u16) -> Pty {
        let (master, slave) = pty::open_pty(rows, cols);
        let side = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the terminal"));
        cmd.stdin(side(&slave))
            .stdout(side(&slave))
            .stderr(side(&slave));
        // SAFETY: the hook runs in the child between fork and exec and makes only the
        // async-signal-safe calls setsid and ioctl; it allocates nothing and takes no lock.
        unsafe { cmd.pre_exec(pty::take_the_terminal) };
        let child = cmd.spawn().expect("spawn oml");
        drop(cmd);
        drop(slave);
        let shared = Arc::new(Shared {
            out: Mutex::new(Output::default()),
            changed: Condvar::new(),
        });
        let reader = File::from(master.try_clone().expect("dup the terminal"));
        let for_reader = Arc::clone(&shared);
        std::thread::spawn(move || drain(reader, &for_reader));
        Pty {
            master: File::from(master),
            child,
            shared,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn type_line(&self, text: &str) {
        (&self.master)
            .write_all(format!("{text}\r").as_bytes())
            .expect("type");
    }

    /// Wait until `needle` has been written at or after byte `from`; the offset after it.
    fn wait_for(&self, needle: &[u8], from: usize) -> usize {
        let deadline = Instant::now() + DEADLINE;
        let mut out = self.shared.lock();
        let mut searched = from;
        loop {
            let start = searched.saturating_sub(needle.len()).max(from);
            if let Some(at) = find(&out.bytes[start..], needle) {
                return start + at + needle.len();
            }
            searched = out.bytes.len();
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !out.closed && !left.is_zero(),
                "no {:?} on the terminal; the last of it: {:?}",
                String::from_utf8_lossy(needle),
                String::from_utf8_lossy(&out.bytes[out.bytes.len().saturating_sub(2000)..])
            );
            out = self
                .shared
                .changed
                .wait_timeout(out, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Ctrl-D at the prompt, and wait for the chat to end.
    fn close(mut self) {
        (&self.master).write_all(b"\x04").expect("Ctrl-D");
        let status = self.child.wait().expect("wait for oml");
        assert!(status.success(), "oml ended with {status:?}");
    }
}

/// Keep what the program writes, answering the cursor position query (`ESC [ 6 n`).
fn drain(mut master: File, shared: &Shared) {
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let asked = {
            let mut out = shared.lock();
            let start = out.bytes.len().saturating_sub(3);
            out.bytes.extend_from_slice(&buf[..n]);
            find(&out.bytes[start..], b"\x1b[6n").is_some()
        };
        shared.changed.notify_all();
        if asked {
            let _ = master.write_all(b"\x1b[1;1R");
        }
    }
    shared.lock().closed = true;
    shared.changed.notify_all();
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}
