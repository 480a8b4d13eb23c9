//! Claude Code's sub-agent files: YAML front matter (`name`, `description`, `tools`,
//! `disallowedTools`, `model`, `permissionMode`, `maxTurns`, `skills`, `mcpServers`,
//! `background`, `isolation`, and oml's `acp`), then the body, the sub-agent's system prompt.
//! Fields it does not know are ignored, as Claude Code adds some. It knows nothing of where the
//! files are (`agent_defs`).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::agent_defs::{AgentDef, Read};
use super::agent_fields::{self, Fields};
use super::front_matter;
use super::skills::{self, Problem};

/// The definition in the markdown `text` of `file`.
pub fn parse(text: &str, file: &Path) -> Result<Read, Problem> {
    let (front, body) = front_matter::split::<yaml_serde::Value>(text)
        .map_err(|e| skills::front_problem(file, e))?;
    let mut f = Fields {
        file,
        text,
        problems: Vec::new(),
    };
    let map = match serde_json::to_value(&front) {
        Ok(Value::Object(map)) => map,
        Ok(Value::Null) => serde_json::Map::new(),
        _ => {
            return Err(f.fatal("", "the front matter is not a map of `key: value` lines"));
        }
    };
    let named = f.string(&map, "name");
    let name = agent_fields::name_of(&f, named)?;
    let described = f.string(&map, "description");
    let description = agent_fields::description_of(&f, described)?;
    let mut lines = BTreeMap::new();
    let def = AgentDef {
        name,
        description,
        prompt: body.to_owned(),
        tools: f.tools(&map, "tools", &mut lines, "tools"),
        disallowed_tools: f.tools(&map, "disallowedTools", &mut lines, "disallowed-tools"),
        model: f.string(&map, "model").filter(|m| m != "inherit"),
        permission_mode: f.mode(&map, "permissionMode"),
        max_turns: max_turns(&mut f, &map),
        skills: f.list(&map, "skills"),
        mcp_servers: f.mcp_servers(&map, "mcpServers"),
        background: flag(&mut f, &map, "background"),
        isolation: isolation(&mut f, &map),
        acp: f.string(&map, "acp"),
        reasoning_effort: f.string(&map, "effort"),
        sandbox_mode: None,
        source: file.display().to_string(),
        line: 1,
        project: false,
        trust_covered: false,
        lines,
    };
    Ok(Read {
        def,
        problems: f.problems,
    })
}

fn max_turns(f: &mut Fields<'_>, map: &serde_json::Map<String, Value>) -> Option<u64> {
    let v = map.get("maxTurns")?;
    let n = v.as_u64().filter(|n| *n > 0);
    if n.is_none() {
        f.problem(
            "maxTurns",
            "`maxTurns` must be a whole number above 0; left out".into(),
        );
    }
    n
}

fn flag(f: &mut Fields<'_>, map: &serde_json::Map<String, Value>, key: &str) -> Option<bool> {
    let v = map.get(key)?;
    let b = v.as_bool();
    if b.is_none() {
        f.problem(key, format!("`{key}` must be true or false; left out"));
    }
    b
}

fn isolation(f: &mut Fields<'_>, map: &serde_json::Map<String, Value>) -> Option<String> {
    let v = f.string(map, "isolation")?;
    if v == "worktree" {
        Some(v)
    } else {
        f.problem(
            "isolation",
            format!("`isolation` is `worktree` or absent, not `{v}`; left out"),
        );
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Read {
        parse(text, Path::new("/p/.claude/agents/reviewer.md")).expect("a definition")
    }

    #[test]
    fn every_field_is_read_and_mapped() {
        let r = read(
            "---\nname: reviewer\ndescription: Reviews\n  code.\ntools: Read, Grep, Glob\n\
             disallowedTools: [Bash]\nmodel: inherit\npermissionMode: acceptEdits\nmaxTurns: 7\n\
             skills:\n  - pdf\nmcpServers:\n  - github\n  - local: {command: srv, args: [a]}\n\
             background: true\nisolation: worktree\nacp: codex\n---\nYou review.\n",
        );
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let d = r.def;
        assert_eq!(d.description, "Reviews code.");
        assert_eq!(
            d.tools.as_deref(),
            Some(&["read".into(), "grep".into(), "find".into()][..])
        );
        assert_eq!(
            d.disallowed_tools.as_deref(),
            Some(&["bash".to_owned()][..])
        );
        assert_eq!(d.model, None);
        assert_eq!(d.permission_mode.as_deref(), Some("accept-edits"));
        assert_eq!(d.max_turns, Some(7));
        assert_eq!(d.skills.as_deref(), Some(&["pdf".to_owned()][..]));
        let servers = d.mcp_servers.expect("servers");
        assert_eq!(servers[0], serde_json::json!({"name": "github"}));
        assert_eq!(servers[1]["command"], "srv");
        assert_eq!(servers[1]["name"], "local");
        assert_eq!(
            (d.background, d.isolation.as_deref()),
            (Some(true), Some("worktree"))
        );
        assert_eq!(d.acp.as_deref(), Some("codex"));
        assert_eq!(d.prompt, "You review.\n");
        assert_eq!(d.lines["tools"], 5);
    }

    #[test]
    fn unknown_tools_and_modes_are_problems_at_their_line_and_the_rest_is_kept() {
        let r = read(
            "---\ndescription: d\ntools:\n  - Read\n  - WebFetch\n  - Bash(git:*)\n\
             permissionMode: sideways\nisolation: container\n---\n",
        );
        assert_eq!(r.def.tools.as_deref(), Some(&["read".to_owned()][..]));
        assert_eq!(r.def.permission_mode, None);
        assert_eq!(r.def.name, "reviewer", "the file's name when none is given");
        let at: Vec<_> = r
            .problems
            .iter()
            .map(|p| (p.line, p.message.as_str()))
            .collect();
        assert_eq!(at.len(), 4, "{at:?}");
        assert_eq!(at[0].0, 3);
        assert!(at[0].1.contains("WebFetch"));
        assert!(at[1].1.contains("Bash(git:*)"));
        assert_eq!(at[2].0, 7);
        assert_eq!(at[3].0, 8);
    }

    #[test]
    fn every_claude_mode_has_an_oml_mode() {
        for (claude, oml) in crate::project::agent_defs::CLAUDE_MODES {
            let r = read(&format!(
                "---\ndescription: d\npermissionMode: {claude}\n---\n"
            ));
            assert_eq!(r.def.permission_mode.as_deref(), Some(oml));
        }
        let r = read("---\ndescription: d\npermissionMode: dontAsk\n---\n");
        assert_eq!(r.def.permission_mode.as_deref(), Some("read-only"));
    }

    #[test]
    fn a_bad_front_matter_is_a_problem_with_its_line() {
        let file = Path::new("/x.md");
        let e = parse("---\nname: a\ndescription: [unclosed\n---\n", file)
            .err()
            .expect("bad");
        assert!(e.line >= 3, "{e:?}");
        let e = parse("---\nname: a\n---\nbody", file)
            .err()
            .expect("no description");
        assert!(e.message.contains("description"), "{e:?}");
        let e = parse("---\n- a\n- b\n---\n", file)
            .err()
            .expect("not a map");
        assert!(e.message.contains("not a map"), "{e:?}");
        let r = parse("---\ndescription: d\nmaxTurns: lots\n---\n", file).expect("kept");
        assert_eq!((r.def.max_turns, r.problems[0].line), (None, 3));
    }
}
