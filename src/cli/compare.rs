//! `oml compare`'s command line: the agents' names resolved to commands in the Lisp image
//! (`client.resolve-agent`: client.defagent, then the catalog), the prompt from the words after
//! `--` and `--file`, and the permission policy. `front::compare` runs the agents and prints.

use anyhow::Context as _;

use super::args::{Cli, CompareArgs};
use super::boot::boot;
use super::modes::NoPrompt;
use crate::ask::wire::Policy;
use crate::front::compare::{self as front, Contender, Output, status};
use crate::front::stdio::err;
use crate::lisp::Output as LispOutput;
use crate::paths::Paths;

/// `oml compare AGENT… [-- PROMPT…] [--file F]`.
pub(super) async fn compare(paths: &Paths, cli: &Cli, args: &CompareArgs) -> anyhow::Result<i32> {
    let prompt = match prompt_text(args) {
        Ok(text) => text,
        Err(why) => {
            return Ok(usage(&format!(
                "{why}: oml compare AGENT… -- PROMPT… (or --file F)"
            )));
        }
    };
    let dir = std::env::current_dir().context("the current directory")?;
    let (lisp, _) = boot(paths, cli.no_init, LispOutput::Stderr).await?;
    let mut contenders = Vec::new();
    for name in &args.agents {
        match super::ask::resolve_in(&lisp, name).await {
            Ok(command) => contenders.push(Contender {
                name: name.clone(),
                command,
            }),
            Err(e) => {
                err!("oml compare: {e}");
                return Ok(status::FAILED);
            }
        }
    }
    let (policy, ask) = if args.approve_all {
        (Policy::ApproveAll, None)
    } else if args.deny_all {
        (Policy::DenyAll, None)
    } else if args.approve_reads || std::fs::File::open("/dev/tty").is_err() {
        (Policy::ApproveReads, None)
    } else {
        let ask = crate::bind::client::terminal_permission_handler();
        (Policy::Ask, Some(ask))
    };
    let output = if cli.json { Output::Json } else { Output::Text };
    Ok(front::run(&dir, &paths.state, contenders, prompt, policy, ask, output).await)
}

/// The words after `--`, then `--file`'s text.
fn prompt_text(args: &CompareArgs) -> Result<String, NoPrompt> {
    let mut prompt = args.prompt.join(" ");
    if let Some(file) = &args.file {
        let text = std::fs::read_to_string(file).map_err(|source| NoPrompt::Unreadable {
            path: file.clone(),
            source,
        })?;
        if !prompt.is_empty() {
            prompt.push_str("\n\n");
        }
        prompt.push_str(&text);
    }
    if prompt.trim().is_empty() {
        return Err(NoPrompt::Empty);
    }
    Ok(prompt)
}

fn usage(why: &str) -> i32 {
    err!("oml compare: {why}");
    status::USAGE
}
