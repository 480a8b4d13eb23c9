//! What a confined command may not do besides writing files outside the workspace: change their
//! metadata, write where oml loads code from, read oml's secrets through /proc, kill its own
//! watcher to outlive oml.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use crate::support::home::{DEADLINE, Run, await_exit};

use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};

use super::harness::{Target, landlock_or_skip, process_runs, tool_result, wait_for_pid};

#[test]
fn metadata_outside_the_workspace_cannot_change() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let victim = t.outside.join("victim");
    std::fs::write(&victim, "x").expect("write the victim");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let before = std::fs::metadata(&victim).expect("stat");
    let v = victim.display();
    let command = format!(
        "chmod 0777 {v}; echo chmod=$?; touch -d 2001-01-01 {v}; echo touch=$?; \
         chown 12345 {v}; echo chown=$?; \
         python3 -c 'import os; os.setxattr(\"{v}\", \"user.x\", b\"1\")'; echo xattr=$?; \
         touch inside && chmod 0700 inside && echo inside=ok"
    );
    let (run, result) = t.model_runs(&command, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    for step in ["chmod=1", "touch=1", "chown=1", "xattr=1", "inside=ok"] {
        assert!(result.contains(step), "{step}: {result}");
    }
    let after = std::fs::metadata(&victim).expect("stat");
    assert_eq!(after.permissions().mode() & 0o777, 0o600, "{result}");
    assert_eq!(after.modified().ok(), before.modified().ok(), "{result}");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(after.uid(), before.uid(), "{result}");
}

#[test]
fn a_writable_cache_folder_does_not_make_omls_compiled_code_writable() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    // The documented `(setq sandbox.writable ["~/.cache"])`, with XDG_CACHE_HOME as ~/.cache.
    t.env.init(&format!(
        "(setq sandbox.writable [{:?}])",
        t.env.home.cache.display().to_string()
    ));
    // A first run fills the compile cache with the init file's Lua.
    let run = Run::from(t.command(None, &["eval", "1"]).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let cached = t.env.home.cached_files();
    assert!(!cached.is_empty(), "the init file was cached");
    let marker = t.outside.join("ran-from-the-cache");
    let payload = format!("io.open([[{}]], [[w]]):write([[x]])", marker.display());
    let cache = t.env.home.fennel_cache();
    let command = format!(
        "for f in {}/*.lua; do printf '%s\\n' \"{payload}\" | cat - \"$f\" > \"$f.new\" && mv \"$f.new\" \"$f\"; echo rc=$?; done; \
         touch {}/new.lua; echo new=$?",
        cache.display(),
        cache.display()
    );
    let (run, result) = t.model_runs(&command, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !result.contains("rc=0") && result.contains("new=1"),
        "{result}"
    );
    let run = Run::from(t.command(None, &["eval", "1"]).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !marker.exists(),
        "code written into the cache ran: {result}"
    );
}

#[test]
fn a_command_cannot_read_the_api_key_from_omls_environment_or_write_into_its_output() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let command = "tr '\\0' '\\n' < /proc/$PPID/environ; echo environ=$?; \
                   echo IN''JECTED > /proc/$PPID/fd/1; echo fd=$?";
    let (run, result) = t.model_runs(command, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    // The fake model's key is `test-key` (support::home::use_fake_model).
    assert!(!result.contains("test-key"), "{result}");
    assert!(!run.stdout.contains("INJECTED"), "{run:?}");
    assert!(
        result.contains("environ=1") && result.contains("fd=1"),
        "{result}"
    );
}

#[test]
fn a_command_that_kills_its_watcher_still_dies_with_oml() {
    let Some(abi) = landlock_or_skip() else {
        return;
    };
    if abi < 6 {
        // Before Landlock's signal scope the watcher is in reach; oml.sandbox-status says so
        // (tests/sandbox.rs checks the status on every ABI).
        return;
    }
    let t = Target::new();
    let pid_file = t.env.project.join("sleep.pid");
    // Every child of the command's shell but the command's own pipeline: the watcher.
    let command = format!(
        "for p in $(cat /proc/$$/task/*/children); do kill -9 $p 2>/dev/null && echo killed $p; done; \
         sleep 300 & echo $! > {}",
        pid_file.display()
    );
    let form = format!("(print (. (oml.tool-bash {command:?} 30 10000) :content)) (io.read)");
    let mut oml = t
        .command(None, &["eval", &form])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn oml");
    let sleep = wait_for_pid(&pid_file);
    assert!(process_runs(sleep), "the background sleep did not start");
    oml.kill().expect("kill -9 oml");
    let out = oml.wait_with_output().expect("reap oml");
    assert!(
        await_exit(sleep, DEADLINE),
        "the sleep outlived oml: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_cached_file_is_run_only_when_it_is_ours_and_names_its_source() {
    let t = Target::new();
    t.env.init("(local x 1)");
    let run = Run::from(t.command(None, &["eval", "1"]).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let cached = t.env.home.cached_files();
    assert_eq!(cached.len(), 1, "the init file was cached");
    let file = &cached[0];
    let header = std::fs::read_to_string(file)
        .expect("read the cache")
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let marker = t.outside.join("ran-from-the-cache");
    let payload = format!("io.open([[{}]], [[w]]):write([[x]])\n", marker.display());
    let planted = t.outside.join("planted.lua");
    std::fs::write(&planted, format!("{header}\n{payload}")).expect("plant");
    type Plant<'a> = Box<dyn Fn() + 'a>;
    let attempts: [(&str, Plant); 3] = [
        (
            "without the header",
            Box::new(|| std::fs::write(file, &payload).unwrap()),
        ),
        (
            "a link to a planted file",
            Box::new(|| {
                let _ = std::fs::remove_file(file);
                std::os::unix::fs::symlink(&planted, file).unwrap();
            }),
        ),
        (
            "writable by others",
            Box::new(|| {
                let _ = std::fs::remove_file(file);
                std::fs::write(file, format!("{header}\n{payload}")).unwrap();
                std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o666)).unwrap();
            }),
        ),
    ];
    for (what, plant) in attempts {
        plant();
        let run = Run::from(t.command(None, &["eval", "1"]).output().expect("oml"));
        assert_eq!(run.code, 0, "{what}: {run:?}");
        assert!(!marker.exists(), "a cached file {what} ran");
    }
}

#[test]
fn a_command_opens_no_raw_or_packet_socket_to_get_past_the_network_rules() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    // As root a command kept CAP_NET_RAW, and a raw socket is no TCP `connect`.
    let command = "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 6); print(\"raw opened\")'; \
                   python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print(\"packet opened\")'; \
                   grep CapEff /proc/$$/status";
    let (run, result) = t.model_runs(command, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!result.contains("opened"), "{result}");
}

#[test]
fn a_descriptor_oml_inherited_does_not_reach_the_command() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    // A file outside, open for writing in oml without close-on-exec (as a careless parent
    // leaves one): the command must not be able to write through it.
    let victim = t.outside.join("through-a-descriptor");
    let file = std::fs::File::create(&victim).expect("create");
    let raw = file.as_raw_fd();
    let args = serde_json::json!({ "command": "echo leaked >&9; echo rc=$?" }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let mut cmd = t.command(Some(&fake), &["-p", "--mode", "yolo", "go"]);
    // SAFETY: dup2 and fcntl between fork and exec; fd 9 is left open across the exec on
    // purpose (its close-on-exec flag cleared, also when `raw` already is 9).
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(raw, 9) < 0 || libc::fcntl(9, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let run = Run::from(cmd.output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let result = tool_result(&fake, 1);
    assert!(result.contains("rc=1"), "{result}");
    drop(file);
    let text = std::fs::read_to_string(&victim).unwrap_or_default();
    assert!(
        !text.contains("leaked"),
        "written through the inherited descriptor"
    );
}

#[test]
fn a_read_only_mount_inside_the_workspace_stays_read_only() {
    let Some(_) = landlock_or_skip() else { return };
    // SAFETY: geteuid takes no arguments.
    if unsafe { libc::geteuid() } != 0 {
        crate::support::home::skip(
            "root",
            "run the tests as root (mounting needs it), as CI does",
        );
        return;
    }
    let t = Target::new();
    let source = t.outside.join("ro-source");
    let target = t.env.project.join("ro-mount");
    for dir in [&source, &target] {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    let sh = |script: &str| {
        let ok = std::process::Command::new("sh")
            .args(["-c", script])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "{script}");
    };
    let (s, d) = (source.display(), target.display());
    sh(&format!(
        "mount --bind {s} {d} && mount -o remount,bind,ro {d}"
    ));
    let (run, result) = t.model_runs("echo x > ro-mount/f; echo rc=$?", &[]);
    sh(&format!("umount {d}"));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(result.contains("rc=1"), "{result}");
    assert!(
        !source.join("f").exists(),
        "written through a read-only mount"
    );
}

#[test]
fn a_user_other_than_root_gets_the_read_only_view_too() {
    use std::os::unix::process::CommandExt;
    let Some(_) = landlock_or_skip() else { return };
    // SAFETY: geteuid takes no arguments.
    if unsafe { libc::geteuid() } != 0 {
        // Run by another user, every other test of this suite is this test.
        return;
    }
    const NOBODY: u32 = 65534;
    let t = Target::new();
    // A copy of the binary the unprivileged user can reach wherever the build is.
    let oml = t.env.root.join("oml");
    std::fs::copy(env!("CARGO_BIN_EXE_oml"), &oml).expect("copy oml");
    let victim = t.outside.join("victim");
    std::fs::write(&victim, "x").expect("victim");
    let chown = std::process::Command::new("chown")
        .args(["-R", &format!("{NOBODY}:{NOBODY}")])
        .arg(&t.env.root)
        .status()
        .is_ok_and(|s| s.success());
    assert!(chown, "chown the test home");
    let form = format!(
        "(print (. (oml.sandbox-status) :read-only-view?)) \
         (print (. (oml.tool-bash \"chmod 777 {}; echo rc=$?\" 30 1000) :content))",
        victim.display()
    );
    let mut cmd = std::process::Command::new(&oml);
    cmd.args(["eval", &form])
        .current_dir(&t.env.project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &t.env.home.home)
        .env("XDG_CONFIG_HOME", &t.env.home.config)
        .env("XDG_STATE_HOME", &t.env.home.state)
        .env("XDG_CACHE_HOME", &t.env.home.cache)
        .env("XDG_RUNTIME_DIR", &t.env.home.runtime)
        .env("TMPDIR", &t.tmp)
        .uid(NOBODY)
        .gid(NOBODY);
    let run = Run::from(cmd.output().expect("run oml as nobody"));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.starts_with("true"), "{run:?}");
    assert!(run.stdout.contains("rc=1"), "{run:?}");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&victim)
        .expect("stat")
        .permissions()
        .mode();
    assert_ne!(
        mode & 0o777,
        0o777,
        "chmod outside the workspace worked as nobody"
    );
}

/// The editor's terminal runs `oml sandbox-exec -- bash -c …` with the sandbox's flags in
/// `OML_SANDBOX`. An editor that drops that variable, or anything that sets it badly, gets a
/// refusal, never an unconfined command; the command never sees the variable.
#[test]
fn the_terminal_launcher_runs_nothing_without_its_sandbox() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let marker = t.outside.join("escaped");
    let command = format!("touch {}; echo policy=[$OML_SANDBOX]", marker.display());
    let launch = |policy: Option<&str>| {
        let mut cmd = t.command(None, &["sandbox-exec", "--", "bash", "-c", &command]);
        cmd.current_dir(&t.env.project).env_remove("OML_SANDBOX");
        if let Some(policy) = policy {
            cmd.env("OML_SANDBOX", policy);
        }
        Run::from(cmd.output().expect("run the launcher"))
    };
    let workspace = t.env.project.display().to_string();
    let refused = [
        None,
        Some("not json"),
        Some(r#"["--network"]"#),
        Some(r#"["--mode", "wide-open"]"#),
        Some(r#"{"mode": "off"}"#),
    ];
    for policy in refused {
        let run = launch(policy);
        assert_eq!(run.code, 126, "{policy:?}: {run:?}");
        assert!(
            run.stderr.contains("not running") || run.stderr.contains("unknown mode"),
            "{run:?}"
        );
        assert!(!marker.exists(), "{policy:?} ran the command");
    }
    let flags = serde_json::json!(["--mode", "workspace-write", "--writable", workspace]);
    let run = launch(Some(&flags.to_string()));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "policy=[]\n", "{run:?}");
    assert!(!marker.exists(), "the sandbox held: {run:?}");
}
