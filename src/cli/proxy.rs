//! `oml proxy AGENT`: the image with the `proxy` namespace, the init files, the live REPL, and
//! the agent's command (a single word is a name resolved by `client.resolve-agent`, more words
//! are the command and its arguments; none makes it a component of a proxy chain);
//! `front::proxy` does the rest.

use serde_json::json;

use super::boot::new_host;
use crate::acp_client::Spawn;
use crate::cancel::CancelToken;
use crate::front::repl::server::ReplServer;
use crate::lisp::{Output, init};
use crate::paths::Paths;

pub(super) async fn proxy(paths: &Paths, no_init: bool, words: &[String]) -> anyhow::Result<i32> {
    let lisp = new_host(paths, Output::Stderr)?;
    let wiring = crate::front::proxy::install(&lisp, words.is_empty())?;
    if !no_init {
        let cwd = std::env::current_dir().ok();
        let report = init::load_all(&lisp, paths, cwd.as_deref(), true).await;
        // stderr stays quiet unless asked (OML_LOG): an editor shows it raw.
        for line in report.messages() {
            tracing::info!("{line}");
        }
    }
    let agent = match resolve(&lisp, words).await {
        // No agent: a component of a proxy chain, whose conductor started its successor.
        _ if words.is_empty() => Spawn::default(),
        Ok(a) => a,
        Err(why) => {
            crate::front::stdio::err!("oml proxy: {why}");
            return Ok(super::status::USAGE);
        }
    };
    let repl = if lisp.setting::<bool>("repl.server?").unwrap_or(true) {
        ReplServer::start(lisp.clone(), paths).await.ok()
    } else {
        None
    };
    let max_line = crate::front::acp::max_line_bytes_from_env();
    let code = crate::front::proxy::serve(lisp, wiring, &agent, max_line).await;
    drop(repl);
    Ok(code)
}

async fn resolve(lisp: &crate::lisp::Lisp, words: &[String]) -> Result<Spawn, String> {
    if let [name] = words {
        let v = lisp
            .call_json("client.resolve-agent", &[json!(name)], &CancelToken::new())
            .await
            .map_err(|e| e.to_string())?;
        let command = v["command"]
            .as_str()
            .ok_or("client.resolve-agent gave no command")?;
        return Ok(Spawn {
            command: command.to_owned(),
            args: strings(&v["args"]),
            env: v["env"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
            cwd: None,
        });
    }
    let (command, args) = words.split_first().ok_or("name the agent")?;
    Ok(Spawn {
        command: command.clone(),
        args: args.to_vec(),
        ..Spawn::default()
    })
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
