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
    let code = oml::cli::main();
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
