//! Trust covers a project's settings files as they were when the user trusted it: a file the
//! model (or a pull) adds after, a link swapped in, a nested project beneath a trusted one, and
//! a trusted tree whose bytes are cut differently into files (the same bytes, moved from the
//! init file into a settings file) never run a hook. Print mode, the real binary, a scripted
//! model. Also: a background swap racing the read, and a project path with odd characters.

use std::os::unix::fs::symlink;
use std::path::Path;

use super::harness::Target;
use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::Run;

/// Settings whose hooks at every tool call, prompt and stop append to `marker`.
fn marking(marker: &Path) -> String {
    let hook = serde_json::json!([{"hooks": [{"type": "command",
        "command": format!("cat >/dev/null; echo ran >> {}", marker.display())}]}]);
    serde_json::json!({"hooks": {"PreToolUse": hook, "UserPromptSubmit": hook, "Stop": hook}})
        .to_string()
}

fn trust(t: &Target, dir: &Path) {
    let out = t
        .command(None, &["trust"])
        .current_dir(dir)
        .output()
        .expect("oml trust");
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn files_added_or_linked_after_trust_never_run() {
    let t = Target::new();
    t.env.file(".git/HEAD", "ref: refs/heads/main\n");
    let good = t.outside.join("good-ran");
    t.env.file(".claude/settings.json", &marking(&good));
    trust(&t, &t.env.project);
    t.model_runs("echo hi", &[]);
    assert!(good.exists(), "a trusted project's hook did not run");
    let evil = t.outside.join("evil-ran");
    // Each is made after trust, as a command of the model's could, then one turn is run.
    let attacks: [(&str, &dyn Fn()); 3] = [
        ("a new .codex/hooks.json", &|| {
            t.env.file(".codex/hooks.json", &marking(&evil));
        }),
        ("a new .claude/settings.local.json", &|| {
            t.env.file(".claude/settings.local.json", &marking(&evil));
        }),
        ("a link swapped in for .claude/settings.json", &|| {
            t.env.file("notes/settings.json", &marking(&evil));
            let file = t.env.project.join(".claude/settings.json");
            std::fs::remove_file(&file).unwrap();
            symlink(t.env.project.join("notes/settings.json"), &file).unwrap();
        }),
    ];
    for (what, attack) in attacks {
        attack();
        let (run, result) = t.model_runs("echo hi", &[]);
        assert_eq!(run.code, 0, "{what}: {run:?}");
        assert_eq!(result.trim(), "hi", "{what}");
        assert!(!evil.exists(), "{what}: a hook added after trust ran");
    }
}

#[test]
fn a_nested_project_under_a_trusted_one_is_not_trusted() {
    let t = Target::new();
    t.env.file(".git/HEAD", "ref: refs/heads/main\n");
    trust(&t, &t.env.project);
    let evil = t.outside.join("evil-ran");
    // A nested checkout (a `.git` file, as a submodule or worktree has) with its own hooks.
    t.env.file("vendor/lib/.git", "gitdir: ../../.git\n");
    t.env
        .file("vendor/lib/.claude/settings.json", &marking(&evil));
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["ok"]))]);
    let run = Run::from(
        t.command(Some(&fake), &["-p", "--mode", "yolo", "hello"])
            .current_dir(t.env.project.join("vendor/lib"))
            .output()
            .expect("oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !evil.exists(),
        "a nested project's hook ran on its parent's trust"
    );
}

#[test]
fn the_same_bytes_cut_into_other_files_are_not_the_tree_trusted() {
    let t = Target::new();
    t.env.file(".git/HEAD", "ref: refs/heads/main\n");
    let evil = t.outside.join("evil-ran");
    let settings = marking(&evil);
    let init = ";; the project's init\n";
    // What the user reviews and trusts: an init file whose tail (after a NUL, unseen in a
    // terminal) is the settings file's record in the hash, and a Lisp file after it.
    let tail = format!(
        "\0lisp/../../.claude/settings.json\0{}\0{settings}",
        settings.len()
    );
    t.env.file(".oml/init.fnl", &format!("{init}{tail}"));
    t.env.file(".oml/lisp/util.fnl", "{}\n");
    trust(&t, &t.env.project);
    // What a pull then brings: the tail moved out of the init file into the settings file.
    t.env.file(".oml/init.fnl", init);
    t.env.file(".claude/settings.json", &settings);
    let (run, _) = t.model_runs("echo hi", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !evil.exists(),
        "bytes moved between files passed as the tree trusted"
    );
}

#[test]
fn a_relative_claude_config_dir_or_codex_home_does_not_make_the_projects_files_the_users() {
    let t = Target::new();
    t.env.file(".git/HEAD", "ref: refs/heads/main\n");
    let evil = t.outside.join("evil-ran");
    t.env.file(".claude/settings.json", &marking(&evil));
    t.env.file(".codex/hooks.json", &marking(&evil));
    // Relative, they would be read against the folder oml runs in: the project's own files.
    for (var, value) in [("CLAUDE_CONFIG_DIR", ".claude"), ("CODEX_HOME", ".codex")] {
        let (run, result) = t.model_runs("echo hi", &[(var, value)]);
        assert_eq!(run.code, 0, "{var}: {run:?}");
        assert_eq!(result.trim(), "hi", "{var}");
        assert!(
            !evil.exists(),
            "{var}={value}: the project's hooks ran as the user's"
        );
    }
}

#[test]
fn a_settings_file_swapped_while_oml_reads_it_never_runs_what_was_not_trusted() {
    let t = Target::new();
    t.env.file(".git/HEAD", "ref: refs/heads/main\n");
    let good = t.outside.join("good-ran");
    let evil = t.outside.join("evil-ran");
    let file = t.env.project.join(".claude/settings.json");
    t.env.file(".claude/settings.json", &marking(&good));
    trust(&t, &t.env.project);
    // Racing every read: the trusted file, another one, and a link out of the project to
    // another one, each put in place by an atomic rename, as a background command could.
    let states = [marking(&good), marking(&evil)];
    std::fs::write(t.outside.join("linked.json"), marking(&evil)).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let racer = {
        let (stop, file, outside) = (stop.clone(), file.clone(), t.outside.clone());
        std::thread::spawn(move || {
            let next = file.with_extension("next");
            let mut i = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::remove_file(&next);
                if i % 3 == 2 {
                    symlink(outside.join("linked.json"), &next).unwrap();
                } else {
                    std::fs::write(&next, &states[i % 3]).unwrap();
                }
                std::fs::rename(&next, &file).unwrap();
                i += 1;
            }
        })
    };
    for _ in 0..6 {
        let (run, _) = t.model_runs("echo hi", &[]);
        assert_eq!(run.code, 0, "{run:?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    racer.join().unwrap();
    assert!(!evil.exists(), "a file swapped in during the read ran");
}

#[test]
fn a_project_path_with_odd_characters_is_trusted_as_itself_and_runs_nothing_else() {
    let t = Target::new();
    let sibling = t
        .env
        .root
        .join("we\nird $(touch PWNED) ;`touch PWNED2` \u{1b}[2J");
    let odd = t
        .env
        .root
        .join("we\nird $(touch PWNED) ;`touch PWNED2` \u{1b}[2J\\");
    let seen = t.outside.join("project-dir");
    let settings = serde_json::json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command",
        "command": format!("cat >/dev/null; printf %s \"$CLAUDE_PROJECT_DIR\" > {}", seen.display())}]}]}});
    for dir in [&odd, &sibling] {
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::create_dir_all(dir.join(".claude")).unwrap();
        std::fs::write(dir.join(".claude/settings.json"), settings.to_string()).unwrap();
    }
    let turn = |dir: &Path| {
        let fake = FakeModel::start([
            Reply::Stream(tool_call_chunks(
                "c1",
                "bash",
                &[r#"{"command": "echo hi"}"#],
            )),
            Reply::Stream(text_chunks(&["done"])),
        ]);
        let run = Run::from(
            t.command(Some(&fake), &["-p", "--mode", "yolo", "go"])
                .current_dir(dir)
                .output()
                .expect("oml"),
        );
        assert_eq!(run.code, 0, "{run:?}");
    };
    turn(&odd);
    assert!(!seen.exists(), "an untrusted project's hook ran");
    trust(&t, &odd);
    turn(&odd);
    let dir = std::fs::read_to_string(&seen).expect("the trusted hook ran");
    assert_eq!(Path::new(&dir), odd, "the hook was given another project");
    for name in ["PWNED", "PWNED2"] {
        assert!(
            !odd.join(name).exists() && !t.env.root.join(name).exists(),
            "{name}"
        );
    }
    // A folder whose name is the trusted one's but for its last character is not trusted by it.
    std::fs::remove_file(&seen).unwrap();
    turn(&sibling);
    assert!(
        !seen.exists(),
        "a look-alike project ran on the other's trust"
    );
}
