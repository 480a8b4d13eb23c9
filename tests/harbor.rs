//! oml on Terminal-Bench's harness: Harbor's generic ACP agent (PyPI `harbor`, pinned, in the
//! virtualenv `scripts/setup-harbor.sh` makes) runs the real `oml acp` as it would in a task
//! container, and its own validator checks the trajectory it makes of the session.
//!
//! Harbor's `AcpAgent` class, given oml's `agent.json` with a `local` distribution (the oml
//! binary under test, with the arguments agent.json gives the released binary), writes the
//! launcher and uploads it with its `acp_runner.py` (`tests/interop/harbor_acp.py`; the task
//! container is the one stand-in: its uploads land in a directory). The test runs that runner
//! with the environment Harbor gives it, against a fake model over TCP, then has the class turn
//! the runner's events into `trajectory.json` and runs Harbor's validator on it. Running the
//! benchmark itself needs Docker and a real model, which the tests do not have
//! (docs/src/terminal-bench.md).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::fake_model::{FakeModel, Reply, Step, text_chunks, tool_call_chunks, usage_chunk};
use support::harbor;
use support::home::{DEADLINE, Env, Run, poll_until, use_fake_model, wait_within};

/// What the task asks.
const INSTRUCTION: &str = "Write done into out.txt, then say what you did.";
/// The model Harbor is asked for (`harbor run -m`), which the fake endpoint lists beside the
/// one oml is configured with.
const REQUESTED: &str = "fake/chosen";

/// Harbor's `AcpAgent` for oml in a throw-away home: its logs directory and the container's
/// file system (where Harbor uploads the launcher and the runner).
struct Trial {
    python: PathBuf,
    env: Env,
    logs: PathBuf,
    container: PathBuf,
    /// The arguments of the `local` distribution, when not agent.json's (`acp`).
    args: Option<Vec<String>>,
}

impl Trial {
    /// `None` after `home::skip` when the Harbor virtualenv is missing.
    fn new() -> Option<Trial> {
        let python = match harbor::python() {
            Ok(p) => p,
            Err(missing) => {
                support::home::skip(&missing, harbor::INSTALL_HARBOR);
                return None;
            }
        };
        let env = Env::new();
        Some(Trial {
            python,
            logs: env.root.join("logs/agent"),
            container: env.root.join("container"),
            args: None,
            env,
        })
    }

    /// `tests/interop/harbor_acp.py STEP`: Harbor's class on oml's agent.json; its JSON output.
    fn harbor_acp(&self, step: &str) -> Value {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(&self.python)
            .arg(root.join("tests/interop/harbor_acp.py"))
            .arg(step)
            .arg(root.join("agent.json"))
            .arg(env!("CARGO_BIN_EXE_oml"))
            .arg(&self.logs)
            .arg(&self.container)
            .args([REQUESTED, INSTRUCTION])
            .args(self.args.iter().map(|a| json!(a).to_string()))
            .stdin(Stdio::null())
            .output()
            .expect("run tests/interop/harbor_acp.py");
        let run = Run::from(out);
        assert_eq!(run.code, 0, "harbor_acp.py {step}: {run:?}");
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{step}: {e}: {run:?}"))
    }

    /// Harbor's runner, as `AcpAgent.run` starts it in the container: from the workspace, with
    /// the environment Harbor gives it (`prepared["run_env"]`) over the home's, pointed at
    /// `fake`; its output goes to files beside the home. Started, not awaited.
    fn start_runner(&self, prepared: &Value, fake: &FakeModel) -> Runner {
        let mut cmd = Command::new(&self.python);
        cmd.arg(prepared["runner"].as_str().unwrap())
            .arg(format!("--instruction={INSTRUCTION}"))
            .arg(format!("--logs-dir={}", self.logs.display()))
            .arg(format!(
                "--launcher={}",
                prepared["launcher"].as_str().unwrap()
            ))
            .current_dir(&self.env.project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.env.home.home)
            .env("XDG_CONFIG_HOME", &self.env.home.config)
            .env("XDG_STATE_HOME", &self.env.home.state)
            .env("XDG_CACHE_HOME", &self.env.home.cache)
            .env("XDG_RUNTIME_DIR", &self.env.home.runtime);
        use_fake_model(&mut cmd, &fake.base_url());
        for (k, v) in prepared["run_env"].as_object().expect("run_env") {
            cmd.env(k, v.as_str().expect("a string value"));
        }
        let stdout = self.env.root.join("runner.out");
        let stderr = self.env.root.join("runner.err");
        cmd.stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap());
        Runner {
            child: cmd.spawn().expect("spawn Harbor's acp_runner.py"),
            stdout,
            stderr,
        }
    }

    /// [`Trial::start_runner`] to its end: its outcome.
    fn run_runner(&self, prepared: &Value, fake: &FakeModel) -> Run {
        self.start_runner(prepared, fake).finish()
    }

    /// A file the runner wrote in the logs directory, as JSON.
    fn log(&self, name: &str) -> Value {
        let text =
            std::fs::read_to_string(self.logs.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
    }
}

/// Harbor's runner, running.
struct Runner {
    child: std::process::Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Runner {
    /// Wait for it to end: its outcome. Killed, failing the test, when it still runs at the
    /// deadline: a runner that does not see the agent fail hangs there.
    fn finish(mut self) -> Run {
        let status = wait_within(&mut self.child, DEADLINE);
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let (stdout, stderr) = (read(&self.stdout), read(&self.stderr));
        let Some(status) = status else {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!("Harbor's runner still ran after {DEADLINE:?}\n{stdout}\n{stderr}");
        };
        let code = status.code().unwrap_or(-1);
        Run {
            code,
            stdout,
            stderr,
        }
    }

    /// The pid of the agent the runner started (its launcher execs `oml acp`), once it runs.
    fn agent_pid(&self) -> i32 {
        let children = format!("/proc/{}/task", self.child.id());
        let mut pid = None;
        let found = poll_until(DEADLINE, || {
            let tasks = std::fs::read_dir(&children).into_iter().flatten().flatten();
            pid = tasks
                .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
                .flat_map(|c| c.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
                .find_map(|p| p.parse().ok());
            pid.is_some()
        });
        assert!(found, "the runner started no agent");
        pid.unwrap_or_default()
    }
}

/// A reply with its usage chunk before the final one, as an endpoint with
/// `stream_options.include_usage` sends it.
fn with_usage(mut steps: Vec<Step>, prompt: u64, completion: u64) -> Reply {
    let at = steps.len() - 1;
    steps.insert(at, usage_chunk(prompt, completion));
    Reply::from(steps)
}

/// A task done as on Terminal-Bench: the model Harbor asks for is chosen through oml's model
/// config option, the command runs in Harbor's terminal (with its permission asked and
/// granted), and the trajectory has the command, its output, the answer and the token counts.
#[test]
fn harbor_s_acp_runner_completes_a_task_with_oml_acp_and_its_validator_accepts_the_trajectory() {
    let Some(trial) = Trial::new() else { return };
    let command = "echo done > out.txt && echo wrote out.txt";
    let args = json!({ "command": command }).to_string();
    let fake = FakeModel::start([
        with_usage(tool_call_chunks("call_1", "bash", &[&args]), 120, 12),
        with_usage(text_chunks(&["I wrote ", "out.txt."]), 150, 6),
    ]);
    fake.serve_models(&["fake/model", REQUESTED]);

    let prepared = trial.harbor_acp("prepare");
    // Harbor's launchers from agent.json: the local one runs this oml, the published binary
    // distribution the same command from where Harbor unpacks the release archive.
    let oml = env!("CARGO_BIN_EXE_oml");
    let exec = |cmd: &str| format!("#!/usr/bin/env sh\nset -eu\nexec {cmd} acp \"$@\"\n");
    assert_eq!(prepared["launcher_text"], exec(oml).as_str(), "{prepared}");
    let published = exec("/opt/harbor-acp-agent/dist/oml");
    assert_eq!(prepared["binary_launcher_text"], published.as_str());
    // What the test runs is what Harbor's command runs in the container.
    let harbor_runs = prepared["run_command"].as_str().unwrap();
    for (key, at) in [
        ("runner", "/installed-agent/acp_runner.py"),
        ("launcher", "/installed-agent/acp-launch.sh"),
    ] {
        assert!(harbor_runs.contains(at), "{harbor_runs}");
        let here = trial.container.join(at.trim_start_matches('/'));
        assert_eq!(prepared[key], here.display().to_string().as_str());
    }
    let run_env = &prepared["run_env"];
    assert_eq!(run_env["ACP_RUNNER_AGENT_ID"], "oml", "{prepared}");
    assert_eq!(run_env["ACP_RUNNER_REQUESTED_MODEL"], REQUESTED);

    let run = trial.run_runner(&prepared, &fake);
    assert_eq!(run.code, 0, "{run:?}");
    let written = std::fs::read_to_string(trial.env.project.join("out.txt"));
    assert_eq!(written.ok().as_deref(), Some("done\n"), "{run:?}");
    // The model Harbor asked for is the one the endpoint was asked, on every call.
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{run:?}");
    for r in &requests {
        assert_eq!(r.body["model"], REQUESTED, "{run:?}");
    }
    let summary = trial.log("acp-summary.json");
    assert_eq!(summary["set_model_mechanism"], "session_config_option");
    assert_eq!(summary["resolved_session_model_id"], REQUESTED, "{summary}");
    assert_eq!(summary["prompt_response"]["stopReason"], "end_turn");
    assert!(summary.get("error").is_none(), "{summary}");

    let converted = trial.harbor_acp("convert");
    let context = &converted["context"];
    assert_eq!(context["n_input_tokens"], 270, "{converted}");
    assert_eq!(context["n_output_tokens"], 18, "{converted}");
    let path = trial.logs.join("trajectory.json");
    harbor::validate(&trial.python, &path).unwrap_or_else(|e| panic!("Harbor's validator: {e}"));
    let trajectory = trial.log("trajectory.json");
    check_trajectory(&trajectory, command);
}

/// What Harbor made of oml's session: its agent, the task, the command with its output, the
/// answer and the token counts.
fn check_trajectory(t: &Value, command: &str) {
    assert_eq!(t["agent"]["name"], "oml", "{t}");
    assert_eq!(t["agent"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(t["agent"]["model_name"], REQUESTED);
    assert_eq!(t["agent"]["extra"]["selected_distribution"], "local");
    let steps = t["steps"].as_array().expect("steps");
    assert_eq!(steps[0]["source"], "user");
    assert_eq!(steps[0]["message"], INSTRUCTION);
    let call_step = steps
        .iter()
        .find(|s| s["tool_calls"].is_array())
        .unwrap_or_else(|| panic!("no step with a tool call: {t}"));
    let call = &call_step["tool_calls"][0];
    assert_eq!(call["arguments"]["command"], command, "{call_step}");
    let result = &call_step["observation"]["results"][0];
    assert_eq!(
        result["source_call_id"], call["tool_call_id"],
        "{call_step}"
    );
    let seen = result["content"].as_str().unwrap_or_default();
    assert!(seen.contains("wrote out.txt"), "{call_step}");
    let last = steps.last().unwrap();
    assert_eq!(last["source"], "agent");
    assert_eq!(last["message"], "I wrote out.txt.", "{t}");
    assert_eq!(t["final_metrics"]["total_prompt_tokens"], 270, "{t}");
    assert_eq!(t["final_metrics"]["total_completion_tokens"], 18);
}

/// An endpoint that refuses the key: the prompt fails with the model's error, the runner exits 1
/// at once and Harbor keeps the error and a valid trajectory of the task alone.
#[test]
fn harbor_s_acp_runner_reports_a_model_endpoint_that_refuses_rather_than_hanging() {
    let Some(trial) = Trial::new() else { return };
    let fake = FakeModel::start([Reply::error(401, r#"{"error": "invalid api key"}"#)]);
    fake.serve_models(&["fake/model", REQUESTED]);
    let prepared = trial.harbor_acp("prepare");
    let run = trial.run_runner(&prepared, &fake);
    assert_eq!(run.code, 1, "{run:?}");
    let summary = trial.log("acp-summary.json");
    let error = &summary["error"];
    assert_eq!(error["type"], "RequestError", "{summary}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("401"),
        "{summary}"
    );
    assert!(summary.get("prompt_response").is_none(), "{summary}");
    // Harbor keeps the failure with the trial, and a trajectory of what there was.
    let converted = trial.harbor_acp("convert");
    let kept = &converted["context"]["metadata"]["acp"]["error"];
    assert_eq!(kept, error, "{converted}");
    let path = trial.logs.join("trajectory.json");
    harbor::validate(&trial.python, &path).unwrap_or_else(|e| panic!("Harbor's validator: {e}"));
    let steps = &trial.log("trajectory.json")["steps"];
    assert_eq!(steps.as_array().map(Vec::len), Some(1), "{steps}");
    assert_eq!(steps[0]["message"], INSTRUCTION);
}

/// oml killed while it waits on the model: the runner sees the connection end and exits 1.
#[test]
fn harbor_s_acp_runner_reports_oml_dying_mid_turn_rather_than_hanging() {
    let Some(trial) = Trial::new() else { return };
    let fake = FakeModel::start([Reply::from(vec![Step::Hang])]);
    fake.serve_models(&["fake/model", REQUESTED]);
    let prepared = trial.harbor_acp("prepare");
    let runner = trial.start_runner(&prepared, &fake);
    // oml is waiting on the model, in the middle of the prompt Harbor sent: it dies.
    fake.wait_for_requests(1, DEADLINE);
    let agent = runner.agent_pid();
    let comm = std::fs::read_to_string(format!("/proc/{agent}/comm")).unwrap_or_default();
    assert_eq!(comm.trim(), "oml", "the launcher execs oml");
    // SAFETY: kill(2) on a process this test started (through the runner and its launcher).
    assert_eq!(unsafe { libc::kill(agent, libc::SIGKILL) }, 0);
    let run = runner.finish();
    assert_eq!(run.code, 1, "{run:?}");
    let summary = trial.log("acp-summary.json");
    // The ACP SDK's (pinned) name for the agent's end: the pending prompt fails with it.
    assert_eq!(summary["error"]["type"], "ConnectionError", "{summary}");
    assert!(summary.get("prompt_response").is_none(), "{summary}");
}

/// Any agent oml drives, on Terminal-Bench: the launcher runs `oml proxy -- COMMAND` (here the
/// command is `oml acp` itself, with no init file of its own), so the proxy's Lisp steps from
/// the init file apply to what Harbor sends, and Harbor's model choice reaches the agent
/// through the proxy.
#[test]
fn harbor_s_acp_runner_drives_an_agent_through_oml_proxy_with_its_lisp_steps() {
    let Some(mut trial) = Trial::new() else {
        return;
    };
    let oml = env!("CARGO_BIN_EXE_oml");
    let args = ["proxy", "--", oml, "acp", "--no-init"];
    trial.args = Some(args.iter().map(|a| a.to_string()).collect());
    trial
        .env
        .init(r#"(proxy.recipes.add-context "CONTEXT from the proxy")"#);
    let fake = FakeModel::start([with_usage(text_chunks(&["Nothing to do."]), 40, 4)]);
    fake.serve_models(&["fake/model", REQUESTED]);
    let prepared = trial.harbor_acp("prepare");
    let launcher =
        format!("#!/usr/bin/env sh\nset -eu\nexec {oml} proxy -- {oml} acp --no-init \"$@\"\n");
    assert_eq!(prepared["launcher_text"], launcher.as_str(), "{prepared}");
    let run = trial.run_runner(&prepared, &fake);
    assert_eq!(run.code, 0, "{run:?}");
    let request = &fake.requests()[0];
    assert_eq!(request.body["model"], REQUESTED, "{run:?}");
    let sent = request.body["messages"].to_string();
    assert!(sent.contains("CONTEXT from the proxy"), "{sent}");
    assert!(sent.contains(INSTRUCTION), "{sent}");
    trial.harbor_acp("convert");
    let path = trial.logs.join("trajectory.json");
    harbor::validate(&trial.python, &path).unwrap_or_else(|e| panic!("Harbor's validator: {e}"));
    let trajectory = trial.log("trajectory.json");
    assert_eq!(
        trajectory["steps"][1]["message"], "Nothing to do.",
        "{trajectory}"
    );
    assert_eq!(trajectory["final_metrics"]["total_prompt_tokens"], 40);
}
