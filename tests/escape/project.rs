//! Code a repository carries for oml or git to run: a confined command or the model's `write`
//! must not plant it, and oml's own `git status` must not run what a downloaded repository's
//! config names (`core.fsmonitor`) outside the sandbox.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::Run;

use super::harness::{Target, landlock_or_skip, tool_result};

/// `git init` in the project.
fn git_init(t: &Target) {
    let status = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&t.env.project)
        .status()
        .expect("run git");
    assert!(status.success());
}

#[test]
fn a_repositorys_config_cannot_make_omls_git_status_run_a_program_unconfined() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    git_init(&t);
    let marker = t.outside.join("ran-by-git");
    let hook = t.outside.join("fsmonitor.sh");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).expect("hook");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // What a repository unpacked from an archive can carry in .git/config.
    let config = t.env.project.join(".git/config");
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(&format!("[core]\n\tfsmonitor = {}\n", hook.display()));
    std::fs::write(&config, text).expect("write config");
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["hello"]))]);
    let run = Run::from(t.command(Some(&fake), &["-p", "hi"]).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let system = fake.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(system.contains("branch"), "git status ran: {system}");
    assert!(
        !marker.exists(),
        "the repository's fsmonitor ran unconfined"
    );
}

#[test]
fn a_command_cannot_plant_git_hooks_git_config_or_project_init_code() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    git_init(&t);
    std::fs::create_dir_all(t.env.project.join(".oml/lisp")).expect("mkdir .oml");
    // Each way found to make the user's own git run a program: a hook, the config, a
    // commondir pointing at a config elsewhere, and .git renamed and copied afresh.
    let command = "echo 'touch /tmp/pwned' > .git/hooks/pre-commit; echo hook=$?; \
                   git config core.fsmonitor /tmp/x; echo config=$?; \
                   echo /tmp > .git/commondir; echo commondir=$?; \
                   mv .git .git-old; echo rename=$?; \
                   echo '(os.execute \"id\")' > .oml/init.fnl; echo init=$?; \
                   echo x > .oml/lisp/m.fnl; echo module=$?; echo ok > ok.txt; echo work=$?";
    let (run, result) = t.model_runs(command, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    for refused in ["hook=1", "commondir=1", "rename=1", "init=1", "module=1"] {
        assert!(result.contains(refused), "{refused}: {result}");
    }
    assert!(!result.contains("config=0"), "{result}");
    assert!(
        result.contains("work=0"),
        "the rest of the workspace is writable: {result}"
    );
    assert!(!t.env.project.join(".git/hooks/pre-commit").exists());
    assert!(!t.env.project.join(".git/commondir").exists());
    assert!(!t.env.project.join(".git-old").exists());
    assert!(!t.env.project.join(".oml/init.fnl").exists());
    let config = std::fs::read_to_string(t.env.project.join(".git/config")).expect("config");
    assert!(!config.contains("fsmonitor"), "{config}");
}

#[test]
fn the_write_tool_asks_before_writing_where_oml_or_git_load_code_from() {
    let t = Target::new();
    git_init(&t);
    let calls = [
        (".git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/pwned\n"),
        (".oml/init.fnl", "(os.execute \"id\")"),
    ];
    let mut replies: Vec<Reply> = calls
        .iter()
        .enumerate()
        .map(|(i, (path, content))| {
            let args = serde_json::json!({ "path": path, "content": content }).to_string();
            Reply::Stream(tool_call_chunks(&format!("c{i}"), "write", &[&args]))
        })
        .collect();
    replies.push(Reply::Stream(text_chunks(&["done"])));
    let fake = FakeModel::start(replies);
    // Print mode's default, accept-edits: edits inside the workspace run without asking.
    let run = Run::from(
        t.command(Some(&fake), &["-p", "set up"])
            .output()
            .expect("oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    for (i, (path, _)) in calls.iter().enumerate() {
        let result = tool_result(&fake, i + 1);
        let result = fake.requests()[i + 1].body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .map_or(result, str::to_owned);
        assert!(
            result.contains("where oml or git load code from")
                && result.contains("needs permission"),
            "{path}: {result}"
        );
        assert!(!t.env.project.join(path).exists(), "{path} was written");
    }
}

#[test]
fn a_module_a_command_writes_into_the_workspace_is_not_required_from_there() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    // An init file that tries an optional module: Lua's `./?.lua` would find one a command put
    // in the workspace, and run it unconfined at the next start.
    t.env.init("(pcall require :mytools-local)");
    let marker = t.outside.join("ran-from-the-workspace");
    let command = format!(
        "printf 'io.open([[{}]], [[w]]):write([[x]]) return {{}}' > mytools-local.lua; \
         printf '(io.open [[{}]] :w)' > mytools-local.fnl; echo planted",
        marker.display(),
        marker.display()
    );
    let (run, result) = t.model_runs(&command, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(result.contains("planted"), "{result}");
    let run = Run::from(t.command(None, &["eval", "1"]).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !marker.exists(),
        "a module in the workspace ran at start-up"
    );
}

#[test]
fn omls_git_status_gives_a_repositorys_filter_no_secret() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    git_init(&t);
    // A clean filter that sends its environment out and then passes the file through; a
    // touched file makes git status run it. UDP no longer leaves a confined command (it has a
    // network namespace of its own), so the filter sends over a Unix datagram socket in a
    // folder outside, which the mount view does not hide.
    let socket = t.outside.join("leak.sock");
    let listener = std::os::unix::net::UnixDatagram::bind(&socket).expect("bind");
    listener
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .expect("timeout");
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(&t.env.project)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git {args:?}");
    };
    std::fs::write(t.env.project.join(".gitattributes"), "a.txt filter=leak\n").expect("attrs");
    std::fs::write(t.env.project.join("a.txt"), "x\n").expect("file");
    let script = t.outside.join("leak.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nenv | python3 -c 'import socket, sys; \
             socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(sys.stdin.buffer.read(), \
             \"{}\")'\nexec cat\n",
            socket.display()
        ),
    )
    .expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let filter = script.display().to_string();
    git(&["config", "filter.leak.clean", &filter]);
    git(&["add", "a.txt", ".gitattributes"]);
    // Newer times than the index: status hashes the file again through the filter.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(t.env.project.join("a.txt"), "x\n").expect("touch");
    // What `git add` itself sent (the test's own environment) is not oml's.
    let _ = received(&listener);
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["hello"]))]);
    let run = Run::from(
        t.command(Some(&fake), &["-p", "hi"])
            .env("OML_TEST_SECRET_TOKEN", "sk-leaked-by-a-filter")
            .output()
            .expect("oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let got = received(&listener);
    assert!(
        got.contains("PATH="),
        "the filter ran under oml's git status: {got:?}"
    );
    for secret in ["test-key", "sk-leaked-by-a-filter"] {
        assert!(!got.contains(secret), "the filter got {secret}: {got}");
    }
}

/// Every datagram that arrives on `listener` until it is quiet for its read timeout, as text.
fn received(listener: &std::os::unix::net::UnixDatagram) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while let Ok(n) = listener.recv(&mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}
