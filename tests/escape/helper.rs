//! The spawn helper: the process outside the sandbox that forks every command oml runs. A
//! confined command is its child, so it is the first thing a command would go after: its socket
//! (whoever holds it can ask for an unconfined command), its `/proc` entries, its signals. And
//! oml is the helper's parent, one `stat` away.

use crate::support::home::{DEADLINE, await_exit};

use super::harness::{Target, landlock_or_skip};

/// The command's parent (the helper) and its parent (oml): the command reads their names, then
/// tries each one's descriptors (the helper's socket is its fd 0), environment and memory.
const REACH: &str = "h=$PPID; o=$(cut -d' ' -f4 /proc/$h/stat); \
    echo helper=$(tr '\\0' ' ' < /proc/$h/cmdline); echo oml=$(tr '\\0' ' ' < /proc/$o/cmdline); \
    for p in $h $o; do \
      readlink /proc/$p/fd/0 > /dev/null 2>&1; echo fd$p=$?; \
      (exec 3<> /proc/$p/fd/0) 2> /dev/null; echo socket$p=$?; \
      cat /proc/$p/environ > /dev/null 2>&1; echo environ$p=$?; \
      head -c1 /proc/$p/mem > /dev/null 2>&1; echo mem$p=$?; \
    done; echo self=$(ls /proc/self/fd | tr '\\n' ' ')";

#[test]
fn a_command_cannot_use_the_spawn_helpers_socket_nor_read_it_or_oml_through_proc() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let (run, result) = t.model_runs(REACH, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    // The attack is aimed where it should be: the parent is the helper, its parent oml.
    assert!(result.contains("__spawn-helper"), "{result}");
    assert!(result.contains(" -p --mode yolo"), "{result}");
    for line in result.lines() {
        let reached = ["fd", "socket", "environ", "mem"]
            .iter()
            .any(|what| line.starts_with(what) && line.ends_with("=0"));
        assert!(!reached, "{line}: {result}");
    }
    // The command holds its stdio and nothing else (ls's own descriptor of the folder aside).
    let own = result
        .lines()
        .find(|l| l.starts_with("self="))
        .expect("self");
    assert_eq!(own.trim_end(), "self=0 1 2 3", "{result}");
}

#[test]
fn a_command_cannot_stop_or_kill_the_spawn_helper() {
    let Some(abi) = landlock_or_skip() else {
        return;
    };
    if abi < 6 {
        // Before Landlock's signal scope a command may signal any process of its user, oml
        // itself included; the status says so (tests/sandbox.rs).
        return;
    }
    let t = Target::new();
    let command = "kill -STOP $PPID; echo stop=$?; kill -9 $PPID; echo kill=$?; echo $PPID";
    let (run, result) = t.model_runs(command, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        result.contains("stop=1") && result.contains("kill=1"),
        "{result}"
    );
}

#[test]
fn the_spawn_helper_ends_with_oml_however_oml_ends() {
    let t = Target::new();
    let pid_file = t.env.project.join("helper.pid");
    let command = format!("echo $PPID > {}", pid_file.display());
    let form = format!("(oml.tool-bash {command:?} 30 10000) (print :ran) (io.read)");
    let mut oml = t
        .command(None, &["eval", &form])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn oml");
    let helper = crate::support::home::wait_for_pid(&pid_file);
    let name = std::fs::read(format!("/proc/{helper}/cmdline")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&name).contains("__spawn-helper"),
        "the command's parent is not the helper: {name:?}"
    );
    oml.kill().expect("kill -9 oml");
    let _ = oml.wait();
    assert!(await_exit(helper, DEADLINE), "the helper outlived oml");
}
