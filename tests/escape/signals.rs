//! Signals and limits end oml cleanly: SIGTERM and SIGHUP to `oml -p` run the shutdown that
//! the end of a turn runs (MCP servers that ignore the end of their input are ended too), and
//! a write past RLIMIT_FSIZE is a storage fault (exit 6), not a death by SIGXFSZ that leaves
//! them behind.

use std::os::unix::process::CommandExt;
use std::process::Stdio;

use crate::support::fake_model::{FakeModel, Reply, Step, pieces, text_chunks};
use crate::support::home::{DEADLINE, Run, await_exit, wait_within};

use crate::support::pty::Term;

use super::harness::{Target, process_runs, wait_for_pid};

/// An MCP server that ignores SIGTERM, SIGHUP and the end of its input, and says its pid.
fn stubborn_server(t: &Target) -> std::path::PathBuf {
    let pid_file = t.env.root.join("server.pid");
    let script = format!(
        "echo $$ > {}; trap '' TERM HUP; exec sleep 300",
        pid_file.display()
    );
    // The chat waits for its servers before the first prompt: a short start keeps it quick.
    t.env.init(&format!(
        "(setq mcp.start-timeout 2)\n\
         (mcp.defserver :stubborn {{:command \"sh\" :args [\"-c\" {script:?}]}})"
    ));
    pid_file
}

#[test]
fn sigterm_and_sighup_end_print_mode_and_its_mcp_servers() {
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        let t = Target::new();
        let pid_file = stubborn_server(&t);
        let fake = FakeModel::start([Reply::Stream(vec![Step::Hang])]);
        let mut oml = t
            .command(Some(&fake), &["-p", "wait"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn oml");
        // The signal comes while the server is starting (it never answers `initialize`).
        let server = wait_for_pid(&pid_file);
        // SAFETY: kill with integers: the oml this test started.
        unsafe { libc::kill(oml.id() as i32, signal) };
        let status = wait_within(&mut oml, DEADLINE).expect("oml ended");
        assert_eq!(status.code(), Some(128 + signal), "signal {signal}");
        assert!(
            await_exit(server, DEADLINE),
            "the MCP server {server} outlived oml after signal {signal}"
        );
        assert!(!process_runs(server));
    }
}

#[test]
fn a_write_past_the_file_size_limit_is_a_storage_fault_not_a_crash() {
    let t = Target::new();
    // An answer larger than the limit: the session line that holds it cannot be written.
    let answer = "x".repeat(200_000);
    let fake = FakeModel::start([Reply::Stream(text_chunks(&pieces(&answer, 10_000)))]);
    let mut cmd = t.command(Some(&fake), &["-p", "say a lot"]);
    // SAFETY: setrlimit with a struct on the child's stack, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 64 * 1024,
                rlim_max: 64 * 1024,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let run = Run::from(cmd.output().expect("run oml"));
    assert_eq!(run.code, 6, "stderr: {}", run.stderr);
    assert!(run.stdout.contains(&answer[..1000]), "the answer was shown");
}

#[test]
fn sigterm_ends_the_chat_mid_turn_and_its_mcp_servers_with_the_terminal_restored() {
    let t = Target::new();
    let pid_file = stubborn_server(&t);
    let fake = FakeModel::start([Reply::Stream(vec![Step::Hang])]);
    let term = Term::spawn(t.command(Some(&fake), &[]), 24, 100);
    term.wait_for("Ctrl-D exits", DEADLINE);
    let server = wait_for_pid(&pid_file);
    term.type_line("wait for me");
    assert!(
        crate::support::home::poll_until(DEADLINE, || !fake.requests().is_empty()),
        "the turn did not start: {}",
        term.screen()
    );
    // SAFETY: kill with integers: the oml this test started.
    unsafe { libc::kill(term.pid() as i32, libc::SIGTERM) };
    assert_eq!(
        term.wait_exit(DEADLINE),
        Some(128 + libc::SIGTERM),
        "{}",
        term.screen()
    );
    assert!(
        await_exit(server, DEADLINE),
        "the MCP server {server} outlived the chat"
    );
}
