//! Sub-agent definitions end to end with the real `oml`: Claude Code's `.claude/agents/*.md` and
//! Codex's `.codex/agents/*.toml` in the project and the user's folders (`CODEX_HOME` honoured),
//! read by `agent.agent-defs` (`oml eval`), listed by `/agents` (`oml -p`) with their sources,
//! shadowing and problems at file:line, named in the system prompt the fake model receives, and
//! run by the `task` tool with only the tools and no more than the mode the parent allows.

mod support;

use serde_json::Value;
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::{Env, write_file};

/// A reviewer with `tools: Read, Grep` and an unknown tool, a Codex explorer, a user reviewer
/// the project's shadows, a user Codex definition under `CODEX_HOME`, and a broken file.
fn fixtures(env: &Env) -> std::path::PathBuf {
    env.file(".git/HEAD", "ref: refs/heads/main\n");
    env.file(
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews a diff for bugs\ntools: Read, Grep, WebSearch\n\
         model: inherit\npermissionMode: plan\n---\nYou review code. Never change it.\n",
    );
    env.file(
        ".codex/agents/explorer.toml",
        "name = \"explorer\"\ndescription = \"Maps unfamiliar code\"\n\
         developer_instructions = \"Explore and report.\"\nmodel = \"gpt-5-mini\"\n\
         model_reasoning_effort = \"low\"\nsandbox_mode = \"read-only\"\n",
    );
    env.file(
        ".claude/agents/broken.md",
        "---\ndescription: x\nname: bro ken\n---\n",
    );
    write_file(
        &env.home.home.join(".claude/agents/reviewer.md"),
        "---\ndescription: the user's reviewer\n---\nUser's.\n",
    );
    let codex_home = env.root.join("codex-home");
    write_file(
        &codex_home.join("agents/planner.toml"),
        "description = \"Plans work\"\ndeveloper_instructions = \"Plan.\"\n",
    );
    codex_home
}

fn eval_json(env: &Env, vars: &[(&str, &str)], form: &str) -> Value {
    let run = env.run_with(
        None,
        vars,
        &["eval", &format!("(print (json.encode {form}))")],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let line = run.stdout.lines().next().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {run:?}"))
}

#[test]
fn definitions_of_both_formats_are_found_mapped_and_shadowed() {
    let env = Env::new();
    let codex_home = fixtures(&env);
    let codex = codex_home.display().to_string();
    let vars = [("CODEX_HOME", codex.as_str())];
    let defs = eval_json(&env, &vars, "(agent.agent-defs)");
    let found = defs["found"].as_array().expect("found");
    let names: Vec<&str> = found.iter().filter_map(|d| d["name"].as_str()).collect();
    assert_eq!(names, ["reviewer", "explorer", "planner"], "{defs:#}");
    let reviewer = &found[0];
    assert_eq!(reviewer["tools"], serde_json::json!(["read", "grep"]));
    assert_eq!(reviewer["permission-mode"], "read-only");
    assert_eq!(
        reviewer["model"],
        Value::Null,
        "inherit is the parent's model"
    );
    assert_eq!(reviewer["project?"], true);
    assert_eq!(reviewer["prompt"], "You review code. Never change it.\n");
    let explorer = &found[1];
    assert_eq!(explorer["prompt"], "Explore and report.");
    assert_eq!(explorer["reasoning-effort"], "low");
    assert_eq!(explorer["sandbox-mode"], "read-only");
    assert_eq!(found[2]["project?"], false);
    let shadowed = &defs["shadowed"][0];
    assert_eq!(shadowed["description"], "the user's reviewer");
    let problems: Vec<String> = defs["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| format!("{}:{}: {}", p["file"], p["line"], p["message"]))
        .collect();
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("reviewer.md\":4: ") && p.contains("WebSearch")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("broken.md\":3: ")),
        "{problems:#?}"
    );
    // `agent.def` wins over a file of the same name, and is found by name.
    let def = eval_json(
        &env,
        &vars,
        "(do (agent.def :explorer {:description \"Lisp's\" :tools [:read]}) (agent.find-agent :explorer))",
    );
    assert_eq!(def["source"], "agent.def");
    assert_eq!(def["description"], "Lisp's");
}

#[test]
fn slash_agents_lists_sources_shadowing_and_problems_with_their_line() {
    let env = Env::new();
    fixtures(&env);
    let run = env.run(None, &["-p", "/agents"]);
    assert_eq!(run.code, 0, "{run:?}");
    let out = &run.stdout;
    let reviewer = env.project.join(".claude/agents/reviewer.md");
    assert!(
        out.contains(&format!("- `reviewer` {}:1 (project)", reviewer.display())),
        "{out}"
    );
    let explorer = env.project.join(".codex/agents/explorer.toml");
    assert!(
        out.contains(&format!("- `explorer` {}:1 (project)", explorer.display())),
        "{out}"
    );
    let user = env.home.home.join(".claude/agents/reviewer.md");
    assert!(
        out.contains(&format!(
            "- `reviewer` {}:1 (shadowed by one of the same name)",
            user.display()
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("- {}:4: `tools`", reviewer.display())),
        "{out}"
    );
    let broken = env.project.join(".claude/agents/broken.md");
    assert!(
        out.contains(&format!("- {}:3: the name may", broken.display())),
        "{out}"
    );
}

#[test]
fn the_model_is_told_the_sub_agents_names_and_descriptions() {
    let env = Env::new();
    fixtures(&env);
    let fake = FakeModel::start([Reply::from(text_chunks(&["ok"]))]);
    let run = env.run(Some(&fake), &["-p", "hello"]);
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    let prompt = requests[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(prompt.contains("run with the task tool"), "{prompt}");
    assert!(
        prompt.contains("- reviewer: Reviews a diff for bugs\n"),
        "{prompt}"
    );
    assert!(
        prompt.contains("- explorer: Maps unfamiliar code"),
        "{prompt}"
    );
    assert!(!prompt.contains("the user's reviewer"), "{prompt}");
}

#[test]
fn a_project_reviewer_runs_with_only_its_tools_and_no_more_than_the_parents_mode() {
    let env = Env::new();
    fixtures(&env);
    env.file(
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews a diff for bugs\ntools: Read, Grep\n\
         permissionMode: bypassPermissions\n---\nYou review code. Never change it.\n",
    );
    let args = serde_json::json!({"agent": "reviewer", "prompt": "review src/"}).to_string();
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "task", &[&args])),
        Reply::from(text_chunks(&["No bugs."])),
        Reply::from(text_chunks(&["Reviewed."])),
    ]);
    let run = env.run(Some(&fake), &["-p", "--mode", "ask", "review it"]);
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let sub = &requests[1].body;
    assert!(
        sub["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("You review code. Never change it."),
        "{sub}"
    );
    let mut names: Vec<&str> = sub["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["grep", "read"], "never bash");
    // The parent reads what was not granted: bypassPermissions above its `ask`.
    let result = requests[2].body.to_string();
    assert!(
        result.contains("yolo is above the parent's ask"),
        "{result}"
    );
}

#[test]
fn a_users_definition_keeps_its_servers_but_not_a_mode_above_the_parents_and_bad_specs_are_errors()
{
    let env = Env::new();
    env.file(".git/HEAD", "ref: refs/heads/main\n");
    let g = eval_json(
        &env,
        &[],
        "(agent.granted {:name :u :project? false :permission-mode :yolo :sandbox-mode :read-only \
           :mcp-servers [{:name :s :command \"srv\"}]} :accept-edits false)",
    );
    assert_eq!(g["permission-mode"], "accept-edits", "{g}");
    assert_eq!(
        g["sandbox-mode"], "read-only",
        "a lower sandbox applies: {g}"
    );
    assert_eq!(g["mcp-servers"][0]["name"], "s", "{g}");
    assert_eq!(g["refused"].as_array().map(Vec::len), Some(1), "{g}");
    for (spec, says) in [
        ("{:description \"d\" :bogus 1}", "unknown key :bogus"),
        (
            "{:description \"d\" :permission-mode :god}",
            ":permission-mode cannot be",
        ),
        ("{:prompt \"no description\"}", "expected (agent.def"),
    ] {
        let form = format!("(let [(ok e) (pcall agent.def :x {spec})] (print ok e))");
        let run = env.run(None, &["eval", &form]);
        assert!(
            run.stdout.starts_with("false") && run.stdout.contains(says),
            "{spec}: {run:?}"
        );
    }
    let run = env.run(
        None,
        &["eval", "(pcall agent.granted {:name :x} :sideways false)"],
    );
    assert!(run.stdout.contains("not a permission mode"), "{run:?}");
}
