//! Part `skills` of the headline benchmark: what discovering skills and markdown commands adds to
//! a new session. The time from `session/new` to its `available_commands_update` (the session's
//! setup done, the commands found) and of the first prompt (whose system prompt lists the
//! skills), in a project with `SKILLS` skills and `COMMANDS` markdown commands, and in the same
//! project without them; a new `oml acp` each run, so no discovery is reused. It knows the
//! fixtures, not the table.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::client::{Agent, Home};
use crate::fake_model::{FakeModel, Reply, text_chunks};
use crate::{Figure, Sizes, median, ms};

/// Skills in the project of the full part.
const SKILLS: usize = 200;
/// Markdown commands in the project of the full part.
const COMMANDS: usize = 100;

fn fill(project: &Path, skills: usize, commands: usize) {
    for i in 0..skills {
        let dir = project.join(format!(".claude/skills/skill-{i:03}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let text = format!(
            "---\nname: skill-{i:03}\ndescription: >\n  Skill number {i}: what it is for, in a sentence or two\n  as real descriptions are.\nallowed-tools: Read, Bash\n---\n# Skill {i}\n\nSteps.\n"
        );
        std::fs::write(dir.join("SKILL.md"), text).expect("write");
    }
    let dir = project.join(".claude/commands");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for i in 0..commands {
        let text = format!("---\ndescription: Command {i}\nargument-hint: ARG\n---\nDo $1.\n");
        std::fs::write(dir.join(format!("cmd-{i:03}.md")), text).expect("write");
    }
}

/// The median times from `session/new` to its `available_commands_update`, and of the first
/// prompt after it (a one-word answer; its system prompt lists the skills), over `runs` fresh
/// agents in `home`.
fn setup_time(home: &Home, bin: &Path, runs: usize) -> (Duration, Duration) {
    let fake = FakeModel::start(Vec::<Reply>::new());
    let (mut setups, mut firsts) = (Vec::new(), Vec::new());
    for _ in 0..runs + 1 {
        let mut agent = Agent::spawn(home, bin, Some(&fake));
        agent.initialize();
        // Answered once the image is built (start-up answers `initialize` first): what follows
        // times the session's set-up, not the rest of start-up.
        let listed = agent.request("session/list", json!({}));
        agent.until_response(listed);
        let start = Instant::now();
        agent.request(
            "session/new",
            json!({"cwd": home.project.display().to_string(), "mcpServers": []}),
        );
        let mut sid = String::new();
        loop {
            let line = agent.line();
            if line.contains("available_commands_update") {
                break;
            }
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                && let Some(id) = v["result"]["sessionId"].as_str()
            {
                sid = id.to_owned();
            }
        }
        setups.push(start.elapsed());
        fake.push(Reply::from(text_chunks(&["ok"])));
        let start = Instant::now();
        let id = agent.prompt(&sid, "hi");
        agent.until_response(id);
        firsts.push(start.elapsed());
    }
    // The first run warms the page cache.
    setups.remove(0);
    firsts.remove(0);
    (median(&setups), median(&firsts))
}

/// Part `skills`.
pub fn skills(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let (skills, commands) = if sizes.runs > 1 {
        (SKILLS, COMMANDS)
    } else {
        (3, 2)
    };
    let bare = Home::new();
    let (setup_without, first_without) = setup_time(&bare, bin, sizes.runs);
    let full = Home::new();
    fill(&full.project, skills, commands);
    let (setup_with, first_with) = setup_time(&full, bin, sizes.runs);
    vec![
        Figure::new(
            "session/new -> commands known, 200 skills + 100 commands",
            "ms",
            "",
        )
        .of(ms(setup_with)),
        Figure::new("  the same without them", "ms", "").of(ms(setup_without)),
        Figure::new("  what they add to session/new", "ms", "<= 2")
            .of(ms(setup_with) - ms(setup_without)),
        Figure::new(
            "first prompt (its system prompt lists them), with them",
            "ms",
            "",
        )
        .of(ms(first_with)),
        Figure::new("  the same without them", "ms", "").of(ms(first_without)),
        Figure::new("  what they add to the first prompt", "ms", "")
            .of(ms(first_with) - ms(first_without)),
    ]
}
