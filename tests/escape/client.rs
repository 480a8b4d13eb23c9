//! oml as an ACP client serving an agent's requests: a sub-agent (a prompt-injected one, or a
//! hostile agent) asks the client to read and write files (`fs/*`: held to the session's
//! folders, never through a link out, never into `.git`) or to run commands in its terminal. Each runs only in the
//! session's folders, only if the program's handler allows it, and confined to exactly those
//! folders: a write into the git repository around them fails, also with `sandbox.mode` off.

use super::harness::{Target, landlock_or_skip};

const FAKE: &str = env!("CARGO_BIN_EXE_oml-fake-agent");

#[test]
fn an_agent_runs_commands_in_the_clients_terminal_only_inside_the_workspace_and_confined() {
    let Some(_) = landlock_or_skip() else { return };
    let t = Target::new();
    // The session's folder is inside a git repository: the repository is not its workspace.
    let repo = t.outside.join("repo");
    let session = repo.join("sub");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(&session).unwrap();
    // The user turned the sandbox off for their own commands, not for a sub-agent's.
    t.env.init("(setq sandbox.mode :off)");
    let program = r#"
(local asked [])
(local conn (client.connect (. arg 1) ["terminal-probe"]
  {:env {:OUTSIDE (. arg 3)}
   :terminal (fn [req]
               (table.insert asked req.command)
               (if (= req.command "rm") "not rm" true))}))
(local s (client.new-session conn (. arg 2)))
(print (. (client.prompt conn s.session-id "go") :text))
(print (table.concat asked ","))
(client.close conn)
"#;
    let file = t.env.file("prog.fnl", program);
    let run = crate::support::home::Run::from(
        t.command(None, &["run"])
            .arg(&file)
            .arg(FAKE)
            .arg(&session)
            .arg(&repo)
            .output()
            .expect("run oml"),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], r#"exit 0 output "hi""#, "{}", run.stdout);
    assert_eq!(
        std::fs::read_to_string(session.join("in.txt")).unwrap(),
        "from-agent\n"
    );
    assert!(
        lines[1].starts_with("refused") && lines[1].contains("outside the session's folders"),
        "{}",
        run.stdout
    );
    assert!(
        !lines[2].contains("exit 0"),
        "the write outside ran: {}",
        run.stdout
    );
    assert!(!repo.join("planted").exists(), "{}", run.stdout);
    assert!(
        lines[3].contains("refused") && lines[3].contains("not rm"),
        "{}",
        run.stdout
    );
    assert_eq!(lines[4], r#"exit 0 output "hello""#, "{}", run.stdout);
    assert!(session.exists());
    // Asked about each command whose folder was inside: not the one outside.
    assert_eq!(lines.last(), Some(&"sh,sh,rm,printenv"), "{}", run.stdout);
}

#[test]
fn the_client_serves_fs_inside_the_sessions_folder_through_a_lisp_handler() {
    let home = crate::support::home::Home::new();
    let project = &home.project;
    std::fs::write(project.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
    let outside = home.root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(&outside, project.join("out")).unwrap();
    let program = r#"
(local asked [])
(local conn (client.connect (. arg 1) ["fs-probe"]
  {:fs (fn [req]
         (table.insert asked (.. req.method " " (req.path:match "[^/]*$")))
         (if (req.path:find "buffer.txt$") {:content "unsaved text"}
             (req.path:find "refused.txt$") "not that one"
             true))}))
(local s (client.new-session conn (. arg 2)))
(print (. (client.prompt conn s.session-id "go") :text))
(print (table.concat asked ","))
(client.close conn)
"#;
    let file = home.write_project_file("prog.fnl", program);
    let out = home
        .blocking_command(&["--no-init", "run"])
        .arg(&file)
        .arg(FAKE)
        .arg(project)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], r#"ok {"content":"one\ntwo\nthree\n"}"#);
    assert_eq!(lines[1], r#"ok {"content":"two\n"}"#);
    assert_eq!(
        lines[2], r#"ok {"content":"unsaved text"}"#,
        "the program's buffer"
    );
    assert!(
        lines[3].starts_with("error") && lines[3].contains("outside the session's folders"),
        "{stdout}"
    );
    assert!(
        lines[4].starts_with("error") && lines[4].contains("outside"),
        "a link out: {stdout}"
    );
    assert_eq!(lines[5], "ok {}");
    assert!(
        lines[6].starts_with("error") && lines[6].contains("outside"),
        "{stdout}"
    );
    assert!(lines[7].contains("not that one"), "{stdout}");
    assert!(
        lines[8].contains("where oml or git load code from"),
        "a git hook: {stdout}"
    );
    assert!(lines[9].contains("needs its content"), "{stdout}");
    assert!(!project.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(project.join("written.txt")).unwrap(),
        "from the agent"
    );
    assert!(!outside.join("planted.txt").exists());
    assert!(!project.join("refused.txt").exists());
    // Only the calls inside the folder reached the program's function.
    assert_eq!(
        lines[11],
        "fs/read_text_file notes.txt,fs/read_text_file notes.txt,fs/read_text_file buffer.txt,fs/write_text_file written.txt,fs/write_text_file refused.txt"
    );
}
