//! The `oml` binary: parse arguments, run the library, map the outcome to an exit code.
//! It is the only place in the crate that exits the process.

/// Allocations of this size and more get mappings of their own, which go back to the system
/// when freed. glibc otherwise raises its threshold after the first such block is freed (up to
/// 32 MiB), and the buffers of a large file in the conversation (a 20 MB `write`: its
/// arguments, the session line, the request body) then come from the heap and stay resident
/// long after they are gone.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD_BYTES: libc::c_int = 1 << 20;

fn main() -> std::process::ExitCode {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it runs before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    }
    // A write past RLIMIT_FSIZE fails with EFBIG, which the session writer handles as the
    // storage fault it is (a notice, `unsaved`, exit 6), instead of SIGXFSZ ending oml with a
    // torn session file. Commands oml starts get the default action back (the sandbox's child
    // steps reset it).
    // SAFETY: signal(2) with SIG_IGN installs no handler; no other thread exists yet.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    // Not dumpable: other processes of this user, confined commands among them, cannot read
    // oml's /proc entries (its environment with the API key, its descriptors, its memory) nor
    // attach to it; only a process with CAP_SYS_PTRACE can, and confined commands lose that
    // (the sandbox drops it). What oml runs is dumpable again after its exec.
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    // The spawn helper (`oml::sandbox::helper`) is this binary started by oml with one argument;
    // it serves oml and nothing else, and needs none of the rest.
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(oml::sandbox::helper::ARG))
    {
        let code = oml::sandbox::helper::serve();
        return std::process::ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    oml::sandbox::helper::enable();
    raise_descriptor_limit();
    let code = oml::cli::main();
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Raise the soft limit on open descriptors (`RLIMIT_NOFILE`) to the hard limit. Every session
/// with a turn running holds a few descriptors (the model's connection, a command's pipes, its
/// watcher's pidfd), and the soft limit many systems start a process with, 1024 or 256, is far
/// below the hard one. Failing to raise it is not an error: oml runs with the limit it was given.
/// Commands oml starts inherit the raised limit.
#[cfg(unix)]
fn raise_descriptor_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a live local of the type it expects.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit only reads a live local of the type it expects.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    }
}

#[cfg(not(unix))]
fn raise_descriptor_limit() {}
