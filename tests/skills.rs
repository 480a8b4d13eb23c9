//! Skills and markdown commands end to end: real-world-shaped fixtures (front matter variants,
//! nested folders, scripts, a broken file) in the user's and the project's folders, the real
//! `oml` (print mode and `oml acp` driven by the scripted editor) against the fake model over
//! TCP: the system prompt's listing, a skill loaded by the model, commands with arguments,
//! precedence and shadowing, Lisp skills and the trust of `skill.fnl`.

mod support;

use serde_json::{Value, json};
use support::acp::*;
use support::fake_model::{FakeModel, Reply, text_chunks, tool_call_chunks};
use support::home::{Env, write_file};

/// The fixtures: a user skill (`pdf`), a Claude Code skill of the user's (`review`), the
/// project's `deploy` (with a script) and nested `lint`, a project `pdf` the user's shadows, a
/// broken SKILL.md and one without a description.
fn fixtures(env: &Env) {
    let config = env.home.config.join("oml");
    write_file(
        &config.join("skills/pdf/SKILL.md"),
        "---\nname: pdf\ndescription: >\n  Fill and read PDF forms.\n  Use for any .pdf file.\n---\n# PDF\nRun scripts/fill.py.\n",
    );
    write_file(
        &env.home.home.join(".claude/skills/review/SKILL.md"),
        "---\nname: review\ndescription: Review a diff for bugs\nallowed-tools: Read, Grep\nlicense: MIT\n---\nReview carefully.\n",
    );
    env.file(
        ".claude/skills/deploy/SKILL.md",
        "---\ndescription: \"Deploy the app: build, then push\"\n---\nRun `bash scripts/deploy.sh` from this folder.\n",
    );
    env.file(".claude/skills/deploy/scripts/deploy.sh", "echo deployed\n");
    env.file(
        ".agents/skills/tools/lint/SKILL.md",
        "---\nname: lint\ndescription: Lint the code\n---\nRun the linter.\n",
    );
    env.file(
        ".oml/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: The project's own pdf skill\n---\nshadowed\n",
    );
    env.file(
        ".oml/skills/broken/SKILL.md",
        "---\nname: broken\ndescription: [never closed\n---\nx\n",
    );
    env.file(".oml/skills/nodesc/SKILL.md", "---\nname: nodesc\n---\nx\n");
}

fn system_prompt(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn tool_result(body: &Value) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    last["content"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn the_system_prompt_lists_the_skills_and_the_model_loads_one() {
    let env = Env::new();
    fixtures(&env);
    let fake = FakeModel::start([
        Reply::from(tool_call_chunks("c1", "skill", &[r#"{"name":"deploy"}"#])),
        Reply::from(tool_call_chunks("c2", "skill", &[r#"{"name":"nodesc"}"#])),
        Reply::from(text_chunks(&["ok"])),
    ]);
    let run = env.run(Some(&fake), &["-p", "deploy it"]);
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    let prompt = system_prompt(&requests[0].body);
    let listed: Vec<&str> = prompt
        .lines()
        .filter(|l| l.starts_with("- ") && l.contains("SKILL.md)"))
        .collect();
    assert_eq!(listed.len(), 4, "{prompt}");
    assert!(
        prompt.contains("- pdf: Fill and read PDF forms. Use for any .pdf file. ("),
        "{prompt}"
    );
    assert!(
        prompt.contains("- review: Review a diff for bugs"),
        "{prompt}"
    );
    assert!(
        prompt.contains("- deploy: Deploy the app: build, then push"),
        "{prompt}"
    );
    assert!(prompt.contains("- lint: Lint the code"), "{prompt}");
    assert!(
        !prompt.contains("project's own pdf"),
        "the user's pdf wins: {prompt}"
    );
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"skill"), "{tools:?}");
    // The model loads the skill: its body, and where its folder is.
    let loaded = tool_result(&requests[1].body);
    assert!(
        loaded.starts_with("Run `bash scripts/deploy.sh` from this folder."),
        "{loaded}"
    );
    let folder = env.project.join(".claude/skills/deploy");
    assert!(
        loaded.contains(&format!("folder is {}", folder.display())),
        "{loaded}"
    );
    let missing = tool_result(&requests[2].body);
    assert!(missing.starts_with("No skill nodesc."), "{missing}");
}

#[test]
fn skills_lists_sources_shadowing_and_problems_with_their_line() {
    let env = Env::new();
    fixtures(&env);
    env.init("(setq skills.disabled [\"lint\"])\n");
    let run = env.run(None, &["-p", "/skills"]);
    assert_eq!(run.code, 0, "{run:?}");
    let out = &run.stdout;
    let config = env.home.config.join("oml/skills/pdf/SKILL.md");
    assert!(
        out.contains(&format!("- `pdf` {}", config.display())),
        "{out}"
    );
    assert!(
        out.contains("`lint`") && out.contains("(disabled: skills.disabled)"),
        "{out}"
    );
    let shadowed = env.project.join(".oml/skills/pdf/SKILL.md");
    assert!(
        out.contains(&format!("- `pdf` {} (shadowed", shadowed.display())),
        "{out}"
    );
    let broken = env.project.join(".oml/skills/broken/SKILL.md");
    assert!(
        out.contains(&format!("- {}:3: ", broken.display())),
        "{out}"
    );
    assert!(out.contains("nodesc/SKILL.md:1: no `description`"), "{out}");
    // Without ~/.claude: the review skill is not offered.
    env.init("(setq skills.claude? false)\n");
    let run = env.run(None, &["-p", "/skills"]);
    assert!(!run.stdout.contains("`review`"), "{run:?}");
}

#[test]
fn markdown_commands_take_arguments_over_acp_and_never_shadow_lisp_commands() {
    let env = Env::new();
    env.file(
        ".claude/commands/fix.md",
        "---\ndescription: Fix an issue\nargument-hint: ISSUE [NOTES]\n---\nFix issue $1. Notes: $ARGUMENTS\n",
    );
    env.file(
        ".claude/commands/frontend/review.md",
        "Review the frontend.\n",
    );
    env.file(
        ".claude/commands/ship.md",
        "---\nargument-hint: VERSION\n---\nShip $1\n",
    );
    env.file(
        ".oml/commands/model.md",
        "---\ndescription: not the real /model\n---\nx\n",
    );
    write_file(
        &env.home.config.join("oml/commands/fix.md"),
        "---\ndescription: The user's fix\n---\nUser fix of $1\n",
    );
    let fake = FakeModel::start([Reply::from(text_chunks(&["fixing"]))]);
    let mut c = Client::start(&env, Some(&fake));
    c.initialize();
    let (sid, setup) = c.new_session(&env.project);
    let update = setup.last().cloned().unwrap_or_default();
    let commands = update["params"]["update"]["availableCommands"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let find = |name: &str| commands.iter().find(|c| c["name"] == name).cloned();
    let fix = find("fix").expect("fix offered");
    assert_eq!(
        fix["description"], "The user's fix",
        "the user's wins: {fix}"
    );
    let review = env.project.join(".claude/commands/frontend/review.md");
    assert_eq!(
        find("frontend:review").map(|c| c["description"].clone()),
        Some(json!(format!("Prompt from {}", review.display())))
    );
    assert_eq!(
        fix["input"]["hint"],
        json!(null),
        "the user's file has no hint: {fix}"
    );
    assert_eq!(
        find("ship").map(|c| c["input"]["hint"].clone()),
        Some(json!("VERSION"))
    );
    let model = find("model").expect("/model");
    assert_ne!(model["description"], "not the real /model");

    let (_, reason) = c.turn(&sid, "/fix 12 the parser");
    assert_eq!(reason, "end_turn");
    let requests = fake.requests();
    let messages = requests[0].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        messages.last().map(|m| m["content"].clone()),
        Some(json!("User fix of 12\n"))
    );
}

/// A skill's `skill.fnl` adds a tool once the skill is loaded, from the user's folders; from a
/// project's `.oml/skills` only once the project is trusted (`oml trust`), and never from its
/// `.claude/skills`. `skill.def` defines a skill in Lisp.
#[test]
fn lisp_skills_and_skill_fnl_run_only_from_trusted_places() {
    let env = Env::new();
    let tool = |name: &str| {
        format!(
            "(fn tools.{name} [] {{:fnl/docstring \"Added by a skill.\"}} \"hi from {name}\")\n"
        )
    };
    write_file(
        &env.home.config.join("oml/skills/mine/SKILL.md"),
        "---\ndescription: mine\n---\nMine.\n",
    );
    write_file(
        &env.home.config.join("oml/skills/mine/skill.fnl"),
        &tool("mine_tool"),
    );
    env.file(
        ".oml/skills/proj/SKILL.md",
        "---\ndescription: proj\n---\nProj.\n",
    );
    env.file(".oml/skills/proj/skill.fnl", &tool("proj_tool"));
    env.file(
        ".claude/skills/other/SKILL.md",
        "---\ndescription: other\n---\nOther.\n",
    );
    env.file(".claude/skills/other/skill.fnl", &tool("other_tool"));
    env.file(".oml/init.fnl", ";; the project's init\n");
    env.init("(skill.def :house {:description \"The house style\" :body #(.. \"Write \" \"plainly.\")})\n");
    let turn = || {
        FakeModel::start([
            Reply::from(tool_call_chunks("c1", "skill", &[r#"{"name":"house"}"#])),
            Reply::from(tool_call_chunks("c2", "skill", &[r#"{"name":"mine"}"#])),
            Reply::from(tool_call_chunks("c3", "skill", &[r#"{"name":"proj"}"#])),
            Reply::from(tool_call_chunks("c4", "skill", &[r#"{"name":"other"}"#])),
            Reply::from(text_chunks(&["ok"])),
        ])
    };
    let tools_of = |body: &Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
            .collect()
    };
    let fake = turn();
    let run = env.run(Some(&fake), &["-p", "--mode", "yolo", "go"]);
    assert_eq!(run.code, 0, "{run:?}");
    let requests = fake.requests();
    assert!(system_prompt(&requests[0].body).contains("- house: The house style"));
    assert_eq!(tool_result(&requests[1].body), "Write plainly.");
    let tools = tools_of(&requests[4].body);
    assert!(tools.contains(&"mine_tool".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"proj_tool".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"other_tool".to_owned()), "{tools:?}");
    let proj = tool_result(&requests[3].body);
    assert!(
        proj.contains("skill.fnl was not run: the project is not trusted"),
        "{proj}"
    );
    let other = tool_result(&requests[4].body);
    assert!(
        other.contains("skill.fnl was not run: a skill.fnl runs only from"),
        "{other}"
    );

    // Trusted, the project's .oml/skills runs; its .claude/skills still does not.
    let trust = env.run(None, &["trust", &env.project.display().to_string()]);
    assert_eq!(trust.code, 0, "{trust:?}");
    let fake = turn();
    let run = env.run(Some(&fake), &["-p", "--mode", "yolo", "go"]);
    assert_eq!(run.code, 0, "{run:?}");
    let tools = tools_of(&fake.requests()[4].body);
    assert!(tools.contains(&"proj_tool".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"other_tool".to_owned()), "{tools:?}");
    // A skill.fnl changed since the trust is a change to the project: not run again.
    env.file(".oml/skills/proj/skill.fnl", &tool("changed_tool"));
    let fake = turn();
    env.run(Some(&fake), &["-p", "--mode", "yolo", "go"]);
    let tools = tools_of(&fake.requests()[4].body);
    assert!(!tools.contains(&"changed_tool".to_owned()), "{tools:?}");
}
