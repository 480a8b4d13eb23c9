//! `oml agents` and the start-up offer of the agents found on `PATH`: the catalog printed (as
//! text, JSON or the documentation's Markdown table) with what discovery found and the proposed
//! configuration, and the one-time offer to write that configuration, loaded at once when
//! written. What the catalog holds, how discovery looks and how the offer asks are
//! `crate::catalog`'s; this file only prints and wires.

use super::status;
use crate::cancel::CancelToken;
use crate::front::stdio::{err, out};
use crate::lisp::Lisp;
use crate::paths::Paths;

/// `oml agents`: the catalog, what is on PATH, and the proposed configuration.
pub(super) fn list(json: bool, markdown: bool) -> i32 {
    use crate::catalog;
    if markdown {
        out!("{}", catalog::markdown_table().trim_end());
        return status::OK;
    }
    let discovered = catalog::discover_env();
    let found: Vec<catalog::Found> = discovered.iter().filter_map(|(_, f)| f.clone()).collect();
    let proposal = catalog::proposed_config(&found);
    if json {
        let agents: Vec<serde_json::Value> = discovered
            .iter()
            .map(|(e, f)| entry_json(e, f.as_ref()))
            .collect();
        let skipped: Vec<serde_json::Value> = catalog::skipped()
            .iter()
            .map(|s| serde_json::json!({"index": s.index, "id": s.id, "reason": s.error.to_string()}))
            .collect();
        out!(
            "{}",
            serde_json::json!({"agents": agents, "skipped": skipped, "proposal": proposal})
        );
        return status::OK;
    }
    out!(
        "Known ACP agents: the ACP registry's (snapshot built into oml) and oml's own; looked for \
         on PATH, nothing is installed or changed:"
    );
    for (e, f) in &discovered {
        let source = e.source.as_str();
        match f {
            Some(f) => out!(
                "  {:<18} {:<22} {source:<8} found      {}",
                e.id,
                e.name,
                f.path.display()
            ),
            None => out!(
                "  {:<18} {:<22} {source:<8} not found  ({})",
                e.id,
                e.name,
                e.commands.join(", ")
            ),
        }
    }
    out!(
        "\nProposed configuration (review it, then add it to ~/.config/oml/agents.fnl or init.fnl):\n"
    );
    out!("{}", proposal.trim_end());
    status::OK
}

/// One entry of `oml agents --json`.
fn entry_json(e: &crate::catalog::Entry, f: Option<&crate::catalog::Found>) -> serde_json::Value {
    let env: serde_json::Map<String, serde_json::Value> = e
        .env
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
        .collect();
    let runs: serde_json::Map<String, serde_json::Value> = e
        .runs
        .iter()
        .map(|(kind, what)| (kind.as_str().to_owned(), serde_json::json!(what)))
        .collect();
    serde_json::json!({
        "id": e.id,
        "name": e.name,
        "source": e.source.as_str(),
        "registryId": (!e.registry_id.is_empty()).then_some(e.registry_id),
        "description": e.description,
        "version": e.version,
        "runs": runs,
        "commands": e.commands,
        "args": e.args,
        "env": env,
        "auth": e.auth.as_str(),
        "homepage": e.homepage,
        "found": f.is_some(),
        "path": f.map(|f| f.path.display().to_string()),
    })
}

/// Interactive start-up: offer once to write the configuration of the agents found on PATH.
pub(super) async fn offer_agents(lisp: &Lisp, paths: &Paths) {
    let default: Option<String> = lisp.setting("client.default-agent").unwrap_or(None);
    let found: Vec<crate::catalog::Found> = crate::catalog::discover_env()
        .into_iter()
        .filter_map(|(_, f)| f)
        .collect();
    let result = {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        let mut output = std::io::stdout();
        crate::catalog::offer::offer(paths, default.is_some(), &found, &mut input, &mut output)
    };
    match result {
        Ok(crate::catalog::offer::Offer::Wrote(file)) => {
            if let Err(e) = lisp.load_file(&file, &CancelToken::new()).await {
                err!("oml: {}: {e}", file.display());
            }
        }
        Ok(_) => {}
        Err(e) => err!("oml: cannot offer the agent configuration: {e}"),
    }
}
