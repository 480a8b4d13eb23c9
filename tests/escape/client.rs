//! oml as an ACP client serving an agent's requests: a sub-agent (a prompt-injected one, or a
//! hostile agent) asks the client to run commands in its terminal. Each runs only in the
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
