//! `oml proxy AGENT`: the image with the `proxy` namespace, the init files, the live REPL, and
//! the agent's command (a word before `--` is a name resolved by `client.resolve-agent`;
//! everything after `--` is the command and its arguments, even one word; nothing makes it a
//! component of a proxy chain); `front::proxy` does the rest.

use serde_json::json;

use super::boot::new_host;
use crate::acp_client::Spawn;
use crate::cancel::CancelToken;
use crate::front::repl::server::ReplServer;
use crate::lisp::{Output, init};
use crate::paths::Paths;

/// Which agent the proxy stands in front of, as the command line named it.
pub(super) enum Agent {
    /// A name before `--`, resolved by `client.resolve-agent`.
    Named(String),
    /// The words after `--`: the command and its arguments.
    Command(Vec<String>),
    /// Neither: a component of a proxy chain.
    Chain,
}

pub(super) async fn proxy(paths: &Paths, no_init: bool, agent: Agent) -> anyhow::Result<i32> {
    let lisp = new_host(paths, Output::Stderr)?;
    let wiring = crate::front::proxy::install(&lisp, matches!(agent, Agent::Chain))?;
    if !no_init {
        let cwd = std::env::current_dir().ok();
        let report = init::load_all(&lisp, paths, cwd.as_deref(), true).await;
        // stderr stays quiet unless asked (OML_LOG): an editor shows it raw.
        for line in report.messages() {
            tracing::info!("{line}");
        }
    }
    let agent = match resolve(&lisp, agent).await {
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

/// Why the proxy has no agent to start.
#[derive(Debug, thiserror::Error)]
enum NoAgent {
    #[error("name the agent")]
    Unnamed,
    #[error(transparent)]
    Lisp(crate::lisp::LispError),
    #[error("client.resolve-agent gave no command")]
    NoCommand,
}

/// How to start the agent; a chain's is empty (its conductor started the successor).
async fn resolve(lisp: &crate::lisp::Lisp, agent: Agent) -> Result<Spawn, NoAgent> {
    let name = match agent {
        Agent::Chain => return Ok(Spawn::default()),
        Agent::Command(words) => {
            let (command, args) = words.split_first().ok_or(NoAgent::Unnamed)?;
            return Ok(Spawn {
                command: command.clone(),
                args: args.to_vec(),
                ..Spawn::default()
            });
        }
        Agent::Named(name) => name,
    };
    let v = lisp
        .call_json("client.resolve-agent", &[json!(name)], &CancelToken::new())
        .await
        .map_err(NoAgent::Lisp)?;
    let command = v["command"].as_str().ok_or(NoAgent::NoCommand)?;
    Ok(Spawn {
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
