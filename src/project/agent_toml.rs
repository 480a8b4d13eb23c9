//! Codex's sub-agent files: TOML with `name`, `description`, `developer_instructions` (the
//! sub-agent's system prompt), `model`, `model_reasoning_effort`, `sandbox_mode`
//! (`read-only`, `workspace-write`, `danger-full-access`), `mcp_servers` (a table of name →
//! server) and `skills`, and oml's `tools`, `permission_mode`, `max_turns`, `background`,
//! `isolation` and `acp` under the same snake-case names. Keys it does not know are ignored.
//! Parsed with the `toml` crate, whose nesting limit bounds a hostile file's cost. It knows
//! nothing of where the files are (`agent_defs`).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::agent_defs::{AgentDef, CODEX_SANDBOX_MODES, Read};
use super::agent_fields::{self, Fields};
use super::skills::Problem;

/// The definition in the TOML `text` of `file`.
pub fn parse(text: &str, file: &Path) -> Result<Read, Problem> {
    let table: toml::Table = toml::from_str(text).map_err(|e| Problem {
        file: file.to_path_buf(),
        line: e.span().map_or(1, |s| {
            1 + text.as_bytes()[..s.start.min(text.len())]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
        }),
        message: e.message().trim().to_owned(),
    })?;
    let mut f = Fields {
        file,
        text,
        problems: Vec::new(),
    };
    let Ok(Value::Object(map)) = serde_json::to_value(&table) else {
        return Err(f.fatal("", "the file is not a TOML table"));
    };
    let named = f.string(&map, "name");
    let name = agent_fields::name_of(&f, named)?;
    let described = f.string(&map, "description");
    let description = agent_fields::description_of(&f, described)?;
    let mut lines = BTreeMap::new();
    let def = AgentDef {
        name,
        description,
        prompt: f.string(&map, "developer_instructions").unwrap_or_default(),
        tools: f.tools(&map, "tools", &mut lines, "tools"),
        disallowed_tools: f.tools(&map, "disallowed_tools", &mut lines, "disallowed-tools"),
        model: f.string(&map, "model").filter(|m| m != "inherit"),
        permission_mode: f.mode(&map, "permission_mode"),
        max_turns: whole(&mut f, &map, "max_turns"),
        skills: f.list(&map, "skills"),
        mcp_servers: f.mcp_servers(&map, "mcp_servers"),
        background: map.get("background").and_then(Value::as_bool),
        isolation: f.string(&map, "isolation").filter(|i| i == "worktree"),
        acp: f.string(&map, "acp"),
        reasoning_effort: f.string(&map, "model_reasoning_effort"),
        sandbox_mode: sandbox_mode(&mut f, &map),
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

fn whole(f: &mut Fields<'_>, map: &serde_json::Map<String, Value>, key: &str) -> Option<u64> {
    let n = map.get(key)?.as_u64().filter(|n| *n > 0);
    if n.is_none() {
        f.problem(
            key,
            format!("`{key}` must be a whole number above 0; left out"),
        );
    }
    n
}

fn sandbox_mode(f: &mut Fields<'_>, map: &serde_json::Map<String, Value>) -> Option<String> {
    let mode = f.string(map, "sandbox_mode")?;
    if CODEX_SANDBOX_MODES.contains(&mode.as_str()) {
        Some(mode)
    } else {
        let m = format!(
            "unknown `sandbox_mode` `{mode}` (one of {}); left out",
            CODEX_SANDBOX_MODES.join(", ")
        );
        f.problem("sandbox_mode", m);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "/p/.codex/agents/explorer.toml";

    #[test]
    fn a_codex_definition_is_read() {
        let r = parse(
            "name = \"explorer\"\ndescription = \"Finds code\"\n\
             developer_instructions = \"\"\"\nExplore.\n\"\"\"\nmodel = \"gpt-5\"\n\
             model_reasoning_effort = \"high\"\nsandbox_mode = \"read-only\"\n\
             skills = [\"pdf\"]\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\nargs = [\"-q\"]\n",
            Path::new(FILE),
        )
        .expect("a definition");
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let d = r.def;
        assert_eq!(
            (d.name.as_str(), d.description.as_str()),
            ("explorer", "Finds code")
        );
        assert_eq!(d.prompt, "Explore.");
        assert_eq!(d.model.as_deref(), Some("gpt-5"));
        assert_eq!(d.reasoning_effort.as_deref(), Some("high"));
        assert_eq!(d.sandbox_mode.as_deref(), Some("read-only"));
        assert_eq!(d.skills.as_deref(), Some(&["pdf".to_owned()][..]));
        let servers = d.mcp_servers.expect("servers");
        assert_eq!(servers[0]["name"], "docs");
        assert_eq!(servers[0]["command"], "docs-mcp");
        assert_eq!(d.tools, None, "no tools field: every tool");
    }

    #[test]
    fn a_bad_file_or_field_is_a_problem_at_its_line() {
        let e = parse("description = \"d\"\nname = = \"x\"\n", Path::new(FILE))
            .err()
            .expect("bad TOML");
        assert_eq!(e.line, 2, "{e:?}");
        let r = parse(
            "description = \"d\"\n\nsandbox_mode = \"yolo\"\n",
            Path::new(FILE),
        )
        .expect("kept");
        assert_eq!(r.def.sandbox_mode, None);
        assert_eq!(r.def.name, "explorer");
        assert_eq!(r.problems[0].line, 3, "{:?}", r.problems);
        let deep = format!(
            "description = \"d\"\nx = {}{}\n",
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert!(parse(&deep, Path::new(FILE)).is_err(), "nesting is bounded");
    }
}
