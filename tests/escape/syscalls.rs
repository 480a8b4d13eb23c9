//! The system calls a confined command may not make (`src/sandbox/seccomp.rs`), each tried for
//! real through Python's `ctypes` and refused, while the same calls succeed outside the sandbox
//! (so the test sees a filter that lets one through), and the builds people run in a workspace
//! (`make`, `git`, `cargo`, `pip`, `npm`) still work inside it.

use std::process::Command;

use super::harness::{Target, landlock_or_skip};

/// Each call as Python: its name, and the `ctypes` expression that makes it. Arguments are
/// harmless or invalid on purpose: the filter answers before the kernel looks at them, so a
/// refused call says `EPERM` (1), and one let through says anything else.
const CALLS: &[(&str, &str)] = &[
    (
        "io_uring_setup",
        "libc.syscall(425, 1, ctypes.byref(ctypes.create_string_buffer(120)))",
    ),
    ("bpf", "libc.syscall(321, 0, 0, 0)"),
    ("userfaultfd", "libc.syscall(323, 0)"),
    ("perf_event_open", "libc.syscall(298, 0, 0, -1, -1, 0)"),
    ("keyctl", "libc.syscall(250, 0, 0, 0, 0, 0)"),
    ("add_key", "libc.syscall(248, b'user', b'k', b'v', 1, -4)"),
    ("request_key", "libc.syscall(249, b'user', b'k', 0, 0)"),
    ("kexec_load", "libc.syscall(246, 0, 0, 0, 0)"),
    (
        "process_vm_readv",
        "libc.syscall(310, os.getppid(), 0, 0, 0, 0, 0)",
    ),
    ("setns", "libc.syscall(308, -1, 0)"),
    ("unshare_user", "libc.syscall(272, 0x10000000)"),
    ("unshare_net", "libc.syscall(272, 0x40000000)"),
    (
        "clone_newpid",
        "libc.syscall(56, 0x20000000 | 17, 0, 0, 0, 0)",
    ),
];

/// A Python program that makes every call of [`CALLS`] and prints `NAME=errno`.
fn program() -> String {
    let mut text = String::from(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         libc.syscall.restype = ctypes.c_long\n",
    );
    for (name, call) in CALLS {
        text.push_str(&format!(
            "ctypes.set_errno(0)\nrc = {call}\nprint('{name}=' + ('ok' if rc >= 0 else str(ctypes.get_errno())))\n\
             if rc == 0 and '{name}'.startswith('clone'): os._exit(0)\n"
        ));
    }
    text
}

#[test]
fn the_calls_an_attack_wants_are_refused_and_allowed_outside() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let script = t.env.project.join("calls.py");
    std::fs::write(&script, program()).expect("write the program");
    let (run, result) = t.model_runs("python3 calls.py", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    for (name, _) in CALLS {
        let refused = format!("{name}=1");
        assert!(
            result.lines().any(|line| line == refused),
            "{name} was not refused with EPERM: {result}"
        );
    }
    // Outside the sandbox the filter is not there: at least the namespace calls get past it
    // (an unprivileged user namespace is allowed here, or the test would say so).
    let outside = Command::new("python3")
        .arg(&script)
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&outside.stdout);
    assert!(text.contains("unshare_user=ok"), "{text}");
}

#[test]
fn builds_still_work_in_the_sandbox() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    std::fs::write(
        t.env.project.join("Makefile"),
        "all:\n\techo made > made.txt\n",
    )
    .expect("mk");
    let command = "make && cat made.txt; \
                   git init -q repo && git -C repo commit -q --allow-empty -m one && echo git=ok; \
                   cargo --version && echo cargo=ok; \
                   python3 -m pip --version >/dev/null && echo pip=ok; \
                   npm --version >/dev/null && echo npm=ok; \
                   python3 -c 'import threading; t = threading.Thread(target=print); t.start(); t.join(); print(\"threads=ok\")'";
    let home = std::env::var("HOME").unwrap_or_default();
    let rustup = std::env::var("RUSTUP_HOME").unwrap_or_else(|_| format!("{home}/.rustup"));
    let cargo = std::env::var("CARGO_HOME").unwrap_or_else(|_| format!("{home}/.cargo"));
    let (run, result) = t.model_runs(
        command,
        &[
            ("RUSTUP_HOME", rustup.as_str()),
            ("CARGO_HOME", cargo.as_str()),
            ("GIT_AUTHOR_NAME", "t"),
            ("GIT_AUTHOR_EMAIL", "t@t"),
            ("GIT_COMMITTER_NAME", "t"),
            ("GIT_COMMITTER_EMAIL", "t@t"),
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    for step in [
        "made",
        "git=ok",
        "cargo=ok",
        "pip=ok",
        "npm=ok",
        "threads=ok",
    ] {
        assert!(result.contains(step), "{step}: {result}");
    }
}
