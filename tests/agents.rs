//! The agent catalog end to end with the real `oml` binary: discovery on a `PATH` made of temp
//! folders with fake executables, `oml agents` (text and JSON), the proposed configuration fed
//! back to `oml run` and used by `(client.connect)` against the fake agent installed under a
//! catalog command name, headless runs that never wait for input, and the start-up offer under a
//! pseudo-terminal (`script`).

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const FAKE: &str = env!("CARGO_BIN_EXE_oml-fake-agent");
const OML: &str = env!("CARGO_BIN_EXE_oml");
const PATIENCE: Duration = Duration::from_secs(30);

/// A throw-away [`support::home::Home`] whose `PATH` is only folders in it, filled by the test.
struct Env {
    home: support::home::Home,
    path: String,
}

impl Env {
    fn new() -> Env {
        Env {
            home: support::home::Home::new(),
            path: String::new(),
        }
    }

    fn folder(&self, name: &str) -> PathBuf {
        let p = self.home.root.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    fn with_path(mut self, folders: &[&str]) -> Env {
        let parts: Vec<String> = folders
            .iter()
            .map(|f| self.folder(f).display().to_string())
            .collect();
        self.path = parts.join(":");
        self
    }

    /// `oml ARGS…` in the home's clean environment with only the folders on `PATH`, stdin closed.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.home.blocking_command(args);
        c.env("PATH", &self.path);
        c
    }

    /// Runs with stdin closed and a deadline; returns (status, stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        run_with_deadline(self.command(args))
    }

    fn agents_file(&self) -> PathBuf {
        self.home.config.join("oml/agents.fnl")
    }
}

fn run_with_deadline(mut c: Command) -> (i32, String, String) {
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = output_within_patience(child, "oml");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn script(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn json(env: &Env) -> serde_json::Value {
    let (status, stdout, stderr) = env.run(&["agents", "--json"]);
    assert_eq!(status, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn entry<'a>(v: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    v["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed"))
}

#[test]
fn discovery_finds_catalog_executables_only_and_the_first_on_path_wins() {
    let env = Env::new().with_path(&["a", "b"]);
    let a = env.folder("a");
    let b = env.folder("b");
    script(&a.join("codex-acp"), "#!/bin/sh\nexit 0\n");
    script(&b.join("codex-acp"), "#!/bin/sh\nexit 0\n");
    // Not executable, a directory, and an executable that is not in the catalog.
    std::fs::write(a.join("gemini"), "#!/bin/sh\n").unwrap();
    std::fs::create_dir(a.join("qwen")).unwrap();
    script(&b.join("qwen"), "#!/bin/sh\n");
    script(&a.join("my-own-tool"), "#!/bin/sh\n");
    // The older Claude command when only it is there.
    script(&b.join("claude-code-acp"), "#!/bin/sh\n");

    let v = json(&env);
    assert_eq!(entry(&v, "codex")["found"], true);
    assert_eq!(
        entry(&v, "codex")["path"],
        a.join("codex-acp").display().to_string()
    );
    assert_eq!(entry(&v, "gemini")["found"], false);
    // The directory named qwen in a is skipped; the executable in b is found.
    assert_eq!(
        entry(&v, "qwen")["path"],
        b.join("qwen").display().to_string()
    );
    assert_eq!(
        entry(&v, "claude")["path"],
        b.join("claude-code-acp").display().to_string()
    );
    assert_eq!(entry(&v, "cursor")["found"], false);
    assert_eq!(entry(&v, "oml")["found"], true);
    let text = v.to_string();
    assert!(!text.contains("my-own-tool"), "{text}");

    let (status, stdout, _) = env.run(&["agents"]);
    assert_eq!(status, 0);
    assert!(stdout.contains("not found"), "{stdout}");
    assert!(!stdout.contains("my-own-tool"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "(client.defagent :codex {{:command \"{}\" :args []}})",
            a.join("codex-acp").display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("(setq client.default-agent :claude)"),
        "{stdout}"
    );
}

/// The agents of the embedded registry snapshot, by their registry ids.
fn snapshot_ids() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog/registry/registry.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_json_lists_every_registry_agent_and_oml_s_own_with_their_source() {
    let env = Env::new().with_path(&["empty"]);
    let v = json(&env);
    let agents = v["agents"].as_array().unwrap();
    let registry = snapshot_ids();
    assert!(registry.len() >= 30, "{registry:?}");
    for id in &registry {
        let listed: Vec<&serde_json::Value> = agents
            .iter()
            .filter(|a| a["registryId"] == id.as_str())
            .collect();
        assert_eq!(listed.len(), 1, "{id} listed {} times", listed.len());
        assert_eq!(listed[0]["source"], "registry", "{id}");
        assert!(!listed[0]["version"].as_str().unwrap().is_empty(), "{id}");
        assert!(!listed[0]["runs"].as_object().unwrap().is_empty(), "{id}");
    }
    // oml's own entries: the agents the registry lacks, and oml itself.
    let own: Vec<&str> = agents
        .iter()
        .filter(|a| a["source"] == "oml")
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(own, ["qoder", "openhands", "kiro", "oml"]);
    assert_eq!(agents.len(), registry.len() + own.len());
    for a in agents {
        assert!(!a["id"].as_str().unwrap().is_empty(), "{a}");
        assert!(!a["name"].as_str().unwrap().is_empty(), "{a}");
        assert!(a["found"].is_boolean(), "{a}");
    }
    // An agent in both keeps oml's id and command names, with the registry's description.
    let claude = entry(&v, "claude");
    assert_eq!(claude["registryId"], "claude-acp");
    assert_eq!(
        claude["commands"],
        serde_json::json!(["claude-agent-acp", "claude-code-acp"])
    );
    assert!(
        claude["runs"]["npx"]
            .as_str()
            .unwrap()
            .starts_with("@agentclientprotocol/claude-agent-acp@"),
        "{claude}"
    );
    assert_eq!(v["skipped"], serde_json::json!([]));
}

#[test]
fn a_registry_agent_oml_had_no_entry_for_is_found_on_path_and_configured() {
    let env = Env::new().with_path(&["bin"]);
    let harn = env.folder("bin").join("harn");
    script(&harn, "#!/bin/sh\nexit 0\n");
    let v = json(&env);
    let e = entry(&v, "harn");
    assert_eq!(e["source"], "registry");
    assert_eq!(e["found"], true);
    assert_eq!(e["path"], harn.display().to_string());
    assert_eq!(e["args"], serde_json::json!(["serve", "acp"]));
    let proposal = v["proposal"].as_str().unwrap();
    let form = format!(
        "(client.defagent :harn {{:command \"{}\" :args [\"serve\" \"acp\"]}})",
        harn.display()
    );
    assert!(proposal.contains(&form), "{proposal}");
    // The proposal evaluates, and the catalog's Lisp view agrees.
    let file = env.home.root.join("prog.fnl");
    std::fs::write(
        &file,
        format!(
            "{proposal}\n(print :cmd (. client.agents :harn :command))\n\
             (print :source (. (catalog.find :harn) :source))\n"
        ),
    )
    .unwrap();
    let (status, stdout, stderr) = env.run(&["--no-init", "run", file.to_str().unwrap()]);
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("cmd\t{}", harn.display())),
        "{stdout}"
    );
    assert!(stdout.contains("source\tregistry"), "{stdout}");
}

#[test]
fn nothing_found_still_exits_0() {
    let env = Env::new().with_path(&["empty"]);
    let (status, stdout, _) = env.run(&["agents"]);
    assert_eq!(status, 0);
    assert!(stdout.contains("codex-acp"), "{stdout}");
    // oml itself is always there.
    assert!(
        stdout.contains("(setq client.default-agent :oml)"),
        "{stdout}"
    );
}

#[test]
fn the_proposed_configuration_evaluates_and_connect_uses_it() {
    let env = Env::new().with_path(&["bin"]);
    let bin = env.folder("bin");
    // The fake agent under a catalog command name; a wrapper picks its behaviour.
    std::os::unix::fs::symlink(FAKE, bin.join("fake-agent")).unwrap();
    script(
        &bin.join("codex-acp"),
        &format!(
            "#!/bin/sh\nexec {} \"${{FAKE_MODE:-ok}}\"\n",
            bin.join("fake-agent").display()
        ),
    );
    let v = json(&env);
    let proposal = v["proposal"].as_str().unwrap();
    assert!(proposal.contains("(setq client.default-agent :codex)"));
    let program = format!(
        "{proposal}\n\
         (print :default client.default-agent (. client.agents :codex :command))\n\
         (print :cmd (. (catalog.command :codex) :command))\n\
         (local conn (client.connect nil {{:env {{:FAKE_MODE :ok}}}}))\n\
         (local s (client.new-session conn))\n\
         (local r (client.prompt conn s.session-id \"hi\"))\n\
         (print :stop r.stop-reason)\n\
         (client.close conn)\n\
         (local conn2 (client.connect :codex))\n\
         (print :named (tostring conn2))\n\
         (client.close conn2)\n"
    );
    let file = env.home.root.join("prog.fnl");
    std::fs::write(&file, program).unwrap();
    let (status, stdout, stderr) = env.run(&["--no-init", "run", file.to_str().unwrap()]);
    assert_eq!(status, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let codex = bin.join("codex-acp").display().to_string();
    assert!(
        stdout.contains(&format!("default\tcodex\t{codex}")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("cmd\t{codex}")), "{stdout}");
    assert!(stdout.contains("stop\tend-turn"), "{stdout}");
    assert!(stdout.contains("named\t#<acp-connection"), "{stdout}");
}

#[test]
fn headless_connect_without_a_default_is_an_actionable_config_error() {
    let env = Env::new().with_path(&["bin"]);
    script(&env.folder("bin").join("gemini"), "#!/bin/sh\n");
    let file = env.home.root.join("prog.fnl");
    std::fs::write(
        &file,
        "(let [(ok e) (pcall client.connect)]\n\
           (print ok e.category)\n\
           (print e.message))\n",
    )
    .unwrap();
    let (status, stdout, stderr) = env.run(&["run", file.to_str().unwrap()]);
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.starts_with("false\tconfig\n"), "{stdout}");
    assert!(stdout.contains("client.default-agent"), "{stdout}");
    assert!(stdout.contains("Found on PATH: gemini"), "{stdout}");
    assert!(
        stdout.contains("(client.defagent :gemini {:command"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(setq client.default-agent :gemini)"),
        "{stdout}"
    );
    // Headless: no question, no file.
    assert!(!stdout.contains("[y/N]"));
    assert!(!env.agents_file().exists());

    // A default that names no defined agent is a config error too.
    let (status, stdout, _) = env.run(&[
        "eval",
        "(do (setq client.default-agent :nope) (let [(ok e) (pcall client.connect)] e.category))",
    ]);
    assert_eq!(status, 0);
    assert!(stdout.contains("config"), "{stdout}");
}

#[test]
fn agents_fnl_loads_before_init_fnl_and_a_broken_default_is_not_fatal() {
    let env = Env::new().with_path(&["bin"]);
    let cfg = env.home.config.join("oml");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("agents.fnl"),
        "(client.defagent :gone {:command \"/nonexistent/agent\" :args []})\n\
         (setq client.default-agent :gone)\n",
    )
    .unwrap();
    std::fs::write(
        cfg.join("init.fnl"),
        "(global seen-default client.default-agent)\n",
    )
    .unwrap();
    let (status, stdout, stderr) = env.run(&["eval", "seen-default"]);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(stdout.trim(), "\"gone\"");
    // The REPL on a closed stdin starts and ends; nothing is asked.
    let (status, stdout, stderr) = env.run(&[]);
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(!stdout.contains("[y/N]"));
    // oml acp starts too, and ends at the end of its input.
    let (status, stdout, stderr) = env.run(&["acp"]);
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(!stdout.contains("[y/N]"));
    // Connecting reports the failure as a value.
    let (status, stdout, _) = env.run(&[
        "eval",
        "(let [(ok e) (pcall client.connect)] [ok e.category])",
    ]);
    assert_eq!(status, 0);
    assert!(stdout.contains("false"), "{stdout}");
    assert!(stdout.contains("connection"), "{stdout}");
}

/// `oml` under a pseudo-terminal (util-linux `script`), answering the offer with `answer`.
fn interactive(env: &Env, answer: &str) -> String {
    // The environment of env.command, on script's command instead.
    let c = env.command(&[]);
    let mut s = Command::new("script");
    s.args(["-qec", OML, "/dev/null"]);
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => s.env(k, v),
            None => s.env_remove(k),
        };
    }
    // script needs a shell from PATH; the agents' PATH goes in last.
    s.env("PATH", format!("{}:/usr/bin:/bin", env.path));
    s.current_dir(&env.home.project);
    let mut child = s
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let stdin = child.stdin.as_mut().unwrap();
        stdin.write_all(answer.as_bytes()).unwrap();
        // End the REPL that follows.
        stdin.write_all(b"(os.exit 0)\n").unwrap();
    }
    drop(child.stdin.take());
    let out = output_within_patience(child, "the interactive oml");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `child`'s output once it exits; killed, and the test failed, if that takes longer than
/// `PATIENCE` (it was probably waiting for input).
fn output_within_patience(child: std::process::Child, what: &str) -> std::process::Output {
    let pid = child.id() as i32;
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output().unwrap());
    });
    match finished.recv_timeout(PATIENCE) {
        Ok(output) => output,
        Err(_) => {
            // SAFETY: the child is ours and not yet reaped (its waiter has not returned).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{what} did not finish within {PATIENCE:?} (was it waiting for input?)");
        }
    }
}

#[test]
fn the_interactive_offer_under_a_pty() {
    if !support::home::script_available() {
        return support::home::skip("util-linux `script`", support::home::INSTALL_SCRIPT);
    }
    // Yes writes the file, once.
    let env = Env::new().with_path(&["bin"]);
    script(&env.folder("bin").join("codex-acp"), "#!/bin/sh\n");
    let out = interactive(&env, "y\n");
    assert!(out.contains("[y/N]"), "{out}");
    let written = std::fs::read_to_string(env.agents_file()).unwrap();
    assert!(
        written.contains("(setq client.default-agent :codex)"),
        "{written}"
    );
    let out = interactive(&env, "");
    assert!(!out.contains("[y/N]"), "asked twice:\n{out}");

    // No writes nothing, and is remembered.
    let env = Env::new().with_path(&["bin"]);
    script(&env.folder("bin").join("codex-acp"), "#!/bin/sh\n");
    let out = interactive(&env, "n\n");
    assert!(out.contains("[y/N]"), "{out}");
    assert!(!env.agents_file().exists());
    let out = interactive(&env, "");
    assert!(!out.contains("[y/N]"), "asked twice:\n{out}");

    // An existing file is shown the snippet, never changed.
    let env = Env::new().with_path(&["bin"]);
    script(&env.folder("bin").join("codex-acp"), "#!/bin/sh\n");
    std::fs::create_dir_all(env.agents_file().parent().unwrap()).unwrap();
    std::fs::write(env.agents_file(), ";; mine\n").unwrap();
    let out = interactive(&env, "y\n");
    assert!(out.contains("already exists"), "{out}");
    assert!(!out.contains("[y/N]"), "{out}");
    assert_eq!(
        std::fs::read_to_string(env.agents_file()).unwrap(),
        ";; mine\n"
    );

    // --no-input never asks, even on a terminal.
    let env = Env::new().with_path(&["bin"]);
    script(&env.folder("bin").join("codex-acp"), "#!/bin/sh\n");
    let mut s = Command::new("script");
    s.args(["-qec", &format!("{OML} --no-input eval 1"), "/dev/null"]);
    let out = s
        .env("PATH", format!("{}:/usr/bin:/bin", env.path))
        .env("XDG_CONFIG_HOME", &env.home.config)
        .env("XDG_STATE_HOME", &env.home.state)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("[y/N]"), "{text}");
}
