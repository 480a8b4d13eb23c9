//! What the system prompt tells the model about the project, through the real binary against
//! the fake model: the `AGENTS.md` files from the project root down to the session directory
//! (and `CLAUDE.md` as a fallback name), capped; the environment with the git state; `/context`.

mod support;

use std::fs;
use std::path::Path;
use std::process::Command;

use support::fake_model::{FakeModel, Reply, text_chunks};
use support::home::{Env, Run};

/// The system message of the first request of `oml -p hi` run in `dir`.
fn system_prompt(env: &Env, dir: &Path) -> String {
    let fake = FakeModel::start([Reply::Stream(text_chunks(&["ok"]))]);
    let run = Run::from(
        env.command(Some(&fake), &["-p", "hi"])
            .current_dir(dir)
            .output()
            .expect("run oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    requests[0].body["messages"][0]["content"]
        .as_str()
        .expect("a system message")
        .to_owned()
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git runs (scripts/setup.sh installs it)");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// The project as a repository root, with `sub/deeper` below it.
fn repo(env: &Env) -> std::path::PathBuf {
    git(&env.project, &["init", "-q"]);
    let deeper = env.project.join("sub/deeper");
    fs::create_dir_all(&deeper).unwrap();
    deeper
}

/// (files written, where oml runs, what the prompt holds in order, what it must not hold)
type Case<'a> = (
    &'a [(&'a str, &'a str)],
    &'a str,
    &'a [&'a str],
    &'a [&'a str],
);

#[test]
fn instructions_come_from_the_root_down_to_the_session_directory() {
    let cases: &[Case] = &[
        (
            &[("AGENTS.md", "ROOT-RULE")],
            "sub/deeper",
            &["ROOT-RULE"],
            &[],
        ),
        (
            &[("sub/AGENTS.md", "SUB-RULE")],
            "sub/deeper",
            &["SUB-RULE"],
            &[],
        ),
        (
            &[("AGENTS.md", "ROOT-RULE"), ("sub/AGENTS.md", "SUB-RULE")],
            "sub/deeper",
            &["ROOT-RULE", "SUB-RULE"],
            &[],
        ),
        (
            &[("CLAUDE.md", "CLAUDE-RULE"), ("sub/AGENTS.md", "SUB-RULE")],
            "sub",
            &["CLAUDE-RULE", "SUB-RULE"],
            &[],
        ),
        (
            &[("AGENTS.md", "AGENTS-WINS"), ("CLAUDE.md", "CLAUDE-LOSES")],
            ".",
            &["AGENTS-WINS"],
            &["CLAUDE-LOSES"],
        ),
        (
            &[("sub/deeper/AGENTS.md", "BELOW")],
            "sub",
            &[],
            &["BELOW", "Project instructions"],
        ),
    ];
    for (files, run_in, expected, absent) in cases {
        let env = Env::new();
        repo(&env);
        for (name, text) in *files {
            env.file(name, text);
        }
        let prompt = system_prompt(&env, &env.project.join(run_in));
        let mut at = 0;
        for text in *expected {
            let found = prompt[at..].find(text);
            assert!(
                found.is_some(),
                "{files:?} from {run_in}: {text} in order in\n{prompt}"
            );
            at += found.unwrap();
        }
        for text in *absent {
            assert!(
                !prompt.contains(text),
                "{files:?}: {text} must not be in\n{prompt}"
            );
        }
    }
}

#[test]
fn the_user_wide_instructions_come_first() {
    let env = Env::new();
    repo(&env);
    support::home::write(
        &env.home.user_init().with_file_name("AGENTS.md"),
        "USER-RULE",
    );
    env.file("AGENTS.md", "ROOT-RULE");
    let prompt = system_prompt(&env, &env.project);
    let user = prompt.find("USER-RULE").expect("the user's file");
    assert!(
        user < prompt.find("ROOT-RULE").expect("the root's file"),
        "{prompt}"
    );
}

#[test]
fn a_huge_instruction_file_is_capped_and_the_cap_is_stated() {
    let env = Env::new();
    repo(&env);
    env.file("AGENTS.md", &"x".repeat(100_000));
    let prompt = system_prompt(&env, &env.project);
    assert!(
        prompt.contains(
            "capped at 32768 characters (project.instructions-max-chars); 67232 characters were cut"
        ),
        "{}",
        &prompt[..prompt.len().min(3000)]
    );
    assert!(prompt.len() < 40_000, "{}", prompt.len());
}

#[test]
fn unusable_instruction_files_are_named_not_pasted() {
    let env = Env::new();
    repo(&env);
    env.file("AGENTS.md", "");
    fs::write(env.project.join("AGENTS.md"), b"PK\x03\x04\0\0binary").unwrap();
    fs::create_dir_all(env.project.join("sub")).unwrap();
    // A link out of the project is not followed (tests/escape/paths.rs has the attack).
    std::os::unix::fs::symlink("/proc/self/mem", env.project.join("sub/AGENTS.md")).unwrap();
    let prompt = system_prompt(&env, &env.project.join("sub"));
    assert!(
        prompt.contains("AGENTS.md\n(not included: the file is not text (it holds NUL bytes))"),
        "{prompt}"
    );
    assert!(
        prompt.contains(&format!(
            "sub/AGENTS.md\n(not included: the file leads outside the project ({}): it is a link \
             to /proc/",
            env.project.display()
        )),
        "{prompt}"
    );
    assert!(!prompt.contains("PK"), "{prompt}");
}

#[test]
fn the_environment_names_the_directory_date_and_git_state() {
    let env = Env::new();
    let outside = system_prompt(&env, &env.project);
    assert!(
        outside.contains(&format!(
            "The working directory is {}.",
            env.project.display()
        )),
        "{outside}"
    );
    assert!(outside.contains("- Git: not a git repository"), "{outside}");
    assert!(outside.contains("- OS: linux ("), "{outside}");
    let date = String::from_utf8(
        Command::new("date")
            .arg("+%Y-%m-%d")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        outside.contains(&format!("- Date: {}", date.trim())),
        "{outside}"
    );

    repo(&env);
    env.file("a.txt", "one");
    git(&env.project, &["add", "a.txt"]);
    git(&env.project, &["commit", "-qm", "one"]);
    env.file("a.txt", "changed");
    env.file("new.txt", "new");
    let branch = system_prompt(&env, &env.project);
    assert!(branch.contains("- Git: branch "), "{branch}");
    assert!(branch.contains("; 1 modified, 1 untracked"), "{branch}");

    git(&env.project, &["checkout", "-q", "--detach"]);
    let detached = system_prompt(&env, &env.project);
    assert!(detached.contains("- Git: detached at "), "{detached}");
}

#[test]
fn context_shows_each_part_and_where_it_comes_from() {
    let env = Env::new();
    repo(&env);
    let agents = env.file("AGENTS.md", "ROOT-RULE");
    let run = env.run(None, &["-p", "/context"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("## agent.base-prompt ("), "{run:?}");
    assert!(run.stdout.contains("## agent.environment ("), "{run:?}");
    assert!(
        run.stdout.contains(&format!("## {} (", agents.display())),
        "{run:?}"
    );
    assert!(run.stdout.contains("ROOT-RULE"), "{run:?}");

    env.init(r#"(fn agent.system-prompt [] "Short.")"#);
    let redefined = env.run(None, &["-p", "/context"]);
    assert!(
        redefined
            .stdout
            .contains("agent.system-prompt is redefined; it gives 6 characters:\n\nShort."),
        "{redefined:?}"
    );
}
