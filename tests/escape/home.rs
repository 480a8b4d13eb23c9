//! A session started where oml's own folders are inside the workspace (the home folder, with
//! `~/.config`, `~/.local/state` and `~/.cache` beneath it): neither a command nor the `write`
//! tool may change what oml loads code and trust from, not even by moving a parent folder aside;
//! nor may a command plant a skill in the user's skill folders (`~/.agents/skills`,
//! `~/.claude/skills`), whose `skill.fnl` oml runs in its own process.

use crate::support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use crate::support::home::Run;

use super::harness::{Target, landlock_or_skip, tool_result};

/// `oml ARGS…` with the test home's root (which holds the XDG folders) as the workspace.
fn in_root(t: &Target, fake: Option<&FakeModel>, args: &[&str]) -> std::process::Command {
    let mut cmd = t.command(fake, args);
    cmd.current_dir(&t.env.root);
    cmd
}

#[test]
fn a_command_cannot_swap_omls_config_folder_by_moving_its_parent() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let marker = t.outside.join("ran-from-a-swapped-config");
    let init = format!(
        "(with-open [f (io.open \"{}\" :w)] (f:write :x))",
        marker.display()
    );
    let command = format!(
        "mv config config.old; echo move=$?; mkdir -p config/oml && echo '{init}' > config/oml/init.fnl; \
         echo plant=$?; mv state state.old; echo state=$?; mv cache cache.old; echo cache=$?"
    );
    let args = serde_json::json!({ "command": command }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let run = Run::from(
        in_root(&t, Some(&fake), &["-p", "--mode", "yolo", "tidy up"])
            .output()
            .expect("oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let result = tool_result(&fake, 1);
    for refused in ["move=1", "state=1", "cache=1"] {
        assert!(result.contains(refused), "{refused}: {result}");
    }
    let run = Run::from(in_root(&t, None, &["eval", "1"]).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !marker.exists(),
        "an init file planted by a command ran: {result}"
    );
}

#[test]
fn the_write_tool_asks_before_writing_into_omls_own_folders() {
    let t = Target::new();
    let init = t.env.home.user_init();
    let args = serde_json::json!({ "path": init.display().to_string(), "content": "(os.exit 7)" })
        .to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "write", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    // Print mode's default, accept-edits: edits inside the workspace run without asking.
    let run = Run::from(
        in_root(&t, Some(&fake), &["-p", "configure"])
            .output()
            .expect("oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let result = fake.requests()[1].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .map_or_else(|| tool_result(&fake, 1), str::to_owned);
    assert!(
        result.contains("where oml or git load code from") && result.contains("needs permission"),
        "{result}"
    );
    assert!(!init.exists(), "the user init file was written");
}

#[test]
fn a_command_cannot_plant_a_skill_whose_lisp_oml_would_run_unconfined() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let home = &t.env.home.home;
    // ~/.claude/skills exists, ~/.agents does not: a command must not make it first either.
    std::fs::create_dir_all(home.join(".claude/skills")).expect("mkdir");
    let marker = t.outside.join("ran-from-a-planted-skill");
    let lisp = format!(
        "(with-open [f (io.open \"{}\" :w)] (f:write :x))",
        marker.display()
    );
    let plant = |dir: &str, name: &str| {
        format!(
            "mkdir -p {dir}/{name} && printf -- '---\\ndescription: {name}\\n---\\nGo.\\n' \\
             > {dir}/{name}/SKILL.md && cat > {dir}/{name}/skill.fnl <<'EOF'\n{lisp}\nEOF\n\
             echo {name}=$?\n"
        )
    };
    let command = plant("$HOME/.agents/skills", "evil") + &plant("$HOME/.claude/skills", "evil2");
    let args = serde_json::json!({ "command": command }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let mut cmd = t.command(Some(&fake), &["-p", "--mode", "yolo", "set up"]);
    let run = Run::from(cmd.current_dir(home).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let result = tool_result(&fake, 1);
    for planted in ["evil=0", "evil2=0"] {
        assert!(!result.contains(planted), "{planted}: {result}");
    }
    // A later session in the same place loads the skills.
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "skill", &[r#"{"name":"evil"}"#])),
        Reply::Stream(tool_call_chunks("c2", "skill", &[r#"{"name":"evil2"}"#])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let mut cmd = t.command(Some(&fake), &["-p", "--mode", "yolo", "use them"]);
    let run = Run::from(cmd.current_dir(home).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !marker.exists(),
        "a skill.fnl planted by a command ran: {result}"
    );
}

#[test]
fn the_write_tool_asks_before_writing_a_skill_into_the_users_skill_folders() {
    let t = Target::new();
    let home = &t.env.home.home;
    let lisp = home.join(".agents/skills/w/skill.fnl");
    let args = serde_json::json!({ "path": lisp.display().to_string(), "content": "(os.exit 7)" })
        .to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "write", &[&args])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    // Print mode's default, accept-edits: edits inside the workspace (here the home folder)
    // run without asking.
    let mut cmd = t.command(Some(&fake), &["-p", "configure"]);
    let run = Run::from(cmd.current_dir(home).output().expect("oml"));
    assert_eq!(run.code, 0, "{run:?}");
    let result = tool_result(&fake, 1);
    assert!(
        result.contains("where oml or git load code from") && result.contains("needs permission"),
        "{result}"
    );
    assert!(!lisp.exists(), "the skill's Lisp was written");
}

/// A skill folder of the user's that is a link into a workspace does not make a `skill.fnl` a
/// command writes there the user's own: oml compares real paths before it runs one.
#[test]
fn a_linked_user_skill_does_not_run_lisp_a_command_wrote_in_the_workspace() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    let home = &t.env.home.home;
    let target = t.env.project.join("myskills/foo");
    std::fs::create_dir_all(&target).expect("mkdir");
    std::fs::write(target.join("SKILL.md"), "---\ndescription: foo\n---\nGo.\n").expect("md");
    std::fs::create_dir_all(home.join(".agents/skills")).expect("mkdir");
    std::os::unix::fs::symlink(&target, home.join(".agents/skills/foo")).expect("link");
    let marker = t.outside.join("ran-from-a-linked-skill");
    let lisp = format!(
        "(with-open [f (io.open \"{}\" :w)] (f:write :x))",
        marker.display()
    );
    let plant = format!("cat > myskills/foo/skill.fnl <<'EOF'\n{lisp}\nEOF\necho planted=$?\n");
    let args = serde_json::json!({ "command": plant }).to_string();
    let fake = FakeModel::start([
        Reply::Stream(tool_call_chunks("c1", "bash", &[&args])),
        Reply::Stream(tool_call_chunks("c2", "skill", &[r#"{"name":"foo"}"#])),
        Reply::Stream(text_chunks(&["done"])),
    ]);
    let run = Run::from(
        t.command(Some(&fake), &["-p", "--mode", "yolo", "use it"])
            .output()
            .expect("oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        tool_result(&fake, 1).contains("planted=0"),
        "the command wrote it"
    );
    assert!(
        !marker.exists(),
        "a skill.fnl a command wrote ran unconfined"
    );
}
