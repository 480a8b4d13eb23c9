//! `oml ask`'s command line: which agent, session and words; the prompt from the arguments, a
//! file or stdin; the permission policy (a `--policy` file needs the Lisp image); and the
//! agent's name resolved to a command (`client.resolve-agent`, also in the image) only when an
//! owner has to be started. `front::ask` prints; `ask` runs the owners.

use super::modes::NoPrompt;
use anyhow::Context as _;
use serde_json::json;

use super::args::{AskArgs, Cli};
use super::boot::boot;
use crate::acp_client::PermissionHandler;
use crate::ask::asker::{self, AskError};
use crate::ask::wire::{Config, Policy, Request};
use crate::ask::{AgentCommand, DEFAULT_SESSION, Key, OwnerSpec, Place, key_dir};
use crate::front::ask::{self as front, Output, status};
use crate::front::stdio::err;
use crate::lisp::{Lisp, Output as LispOutput};
use crate::paths::Paths;

/// The `oml __ask-owner` process: reads its spec from stdin and serves it.
pub(super) fn owner() -> i32 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return 1;
        }
    };
    let code = runtime.block_on(asker::owner_main());
    runtime.shutdown_background();
    crate::acp_client::process::kill_remaining_groups();
    code
}

/// `oml ask …`.
pub(super) async fn ask(paths: &Paths, cli: &Cli, args: &AskArgs) -> anyhow::Result<i32> {
    let output = if cli.json {
        Output::Json
    } else if args.quiet {
        Output::Quiet
    } else {
        Output::Text
    };
    let mut words = args.words.clone();
    let agent = match (&args.agent, &args.agent_name) {
        (Some(command), name) => {
            words.splice(0..0, name.iter().cloned());
            command.clone()
        }
        (None, Some(name)) => name.clone(),
        (None, None) => {
            return Ok(usage(
                "name the agent: oml ask AGENT PROMPT… (`oml agents` lists them), or --agent 'COMMAND'",
            ));
        }
    };
    let cwd = key_dir(&std::env::current_dir().context("the current directory")?);
    let key = Key {
        agent,
        cwd,
        name: args
            .session
            .clone()
            .unwrap_or_else(|| DEFAULT_SESSION.to_owned()),
    };
    let place = Place::of(paths, &key);
    let word = words.first().map(String::as_str);
    let alone = words.len() == 1;
    Ok(match word {
        Some("status") if alone => front::show_status(&place, &key, output).await,
        Some("cancel") if alone => front::cancel(&place, output).await,
        Some("sessions") => sessions(paths, cli, args, &key, &words[1..], output).await,
        Some("exec") => {
            words.remove(0);
            return exec(paths, cli, args, key, &words, output).await;
        }
        _ => return prompt(paths, cli, args, key, &words, output).await,
    })
}

async fn sessions(
    paths: &Paths,
    cli: &Cli,
    args: &AskArgs,
    key: &Key,
    words: &[String],
    output: Output,
) -> i32 {
    let place = Place::of(paths, key);
    match words.first().map(String::as_str) {
        None | Some("list") => front::sessions_list(paths, key, output).await,
        Some("show") => front::sessions_show(&place, key, output).await,
        Some("history") => front::sessions_history(&place, output),
        Some("close") => front::sessions_close(&place, output).await,
        Some("new") => {
            let resolve = resolve(paths, cli.no_init, args, key.clone(), true);
            match asker::ask(&place, &Request::NewSession, resolve).await {
                Ok(mut c) => match c.next().await {
                    Ok(Some(crate::ask::wire::Event::Ack { what })) => {
                        crate::front::stdio::out!("{what}");
                        status::END_TURN
                    }
                    Ok(Some(crate::ask::wire::Event::Failed { message, .. })) => {
                        err!("oml ask: {}", crate::printable::printable(&message));
                        status::FAILED
                    }
                    _ => status::FAILED,
                },
                Err(e) => front::failed_to_ask(&e, output),
            }
        }
        Some(other) => usage(&format!(
            "oml ask AGENT sessions: {other} is not one of list, new, close, show, history"
        )),
    }
}

/// A prompt to the persistent session's owner.
async fn prompt(
    paths: &Paths,
    cli: &Cli,
    args: &AskArgs,
    key: Key,
    words: &[String],
    output: Output,
) -> anyhow::Result<i32> {
    let (text, config) = match prompt_and_config(args, words).await {
        Ok(read) => read,
        Err(why) => return Ok(usage(&why.to_string())),
    };
    let (policy, decide, _image) = permissions(paths, cli, args).await?;
    let request = Request::Prompt {
        prompt: json!([{"type": "text", "text": text}]),
        wait: !args.no_wait,
        policy,
        ttl: args.ttl,
        config,
    };
    let place = Place::of(paths, &key);
    let resolve = resolve(paths, cli.no_init, args, key, true);
    let conversation = match asker::ask(&place, &request, resolve).await {
        Ok(c) => c,
        Err(e) => return Ok(front::failed_to_ask(&e, output)),
    };
    Ok(if args.no_wait {
        front::queued(conversation, output).await
    } else {
        front::follow(conversation, output, decide).await
    })
}

/// `exec`: a one-shot session in this process.
async fn exec(
    paths: &Paths,
    cli: &Cli,
    args: &AskArgs,
    key: Key,
    words: &[String],
    output: Output,
) -> anyhow::Result<i32> {
    let (text, config) = match prompt_and_config(args, words).await {
        Ok(read) => read,
        Err(why) => return Ok(usage(&why.to_string())),
    };
    let (policy, decide, _image) = permissions(paths, cli, args).await?;
    let spec = match resolve(paths, cli.no_init, args, key, false).await {
        Ok(s) => s,
        Err(e) => return Ok(front::failed_to_ask(&e, output)),
    };
    let prompt = json!([{"type": "text", "text": text}]);
    if let Err(e) = asker::check_prompt(&prompt) {
        return Ok(front::failed_to_ask(&e, output));
    }
    let conversation = asker::exec(spec, prompt, policy, config);
    Ok(front::follow(conversation, output, decide).await)
}

/// The prompt's text and the session's settings from the command line; `Err`'s text is the
/// usage message.
async fn prompt_and_config(args: &AskArgs, words: &[String]) -> Result<(String, Config), NoPrompt> {
    Ok((prompt_text(args, words).await?, config(args)?))
}

/// The prompt: `--file`'s text after the words, else the words and piped stdin as in print
/// mode.
async fn prompt_text(args: &AskArgs, words: &[String]) -> Result<String, NoPrompt> {
    let Some(file) = &args.file else {
        return super::modes::prompt_text(words).await;
    };
    let text = std::fs::read_to_string(file).map_err(|source| NoPrompt::Unreadable {
        path: file.clone(),
        source,
    })?;
    let mut prompt = words.join(" ");
    if !prompt.is_empty() {
        prompt.push_str("\n\n");
    }
    prompt.push_str(&text);
    if prompt.trim().is_empty() {
        return Err(NoPrompt::EmptyFile(file.clone()));
    }
    Ok(prompt)
}

fn config(args: &AskArgs) -> Result<Config, NoPrompt> {
    let set = args
        .set
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => Err(NoPrompt::BadSet(kv.clone())),
        })
        .collect::<Result<_, _>>()?;
    Ok(Config {
        model: args.model.clone(),
        mode: args.mode.clone(),
        set,
    })
}

/// The policy the owner applies, the handler that answers its questions here, and the image a
/// `--policy` handler lives in (kept alive while the prompt runs).
async fn permissions(
    paths: &Paths,
    cli: &Cli,
    args: &AskArgs,
) -> anyhow::Result<(Policy, Option<PermissionHandler>, Option<Lisp>)> {
    if args.approve_all {
        return Ok((Policy::ApproveAll, None, None));
    }
    if args.deny_all {
        return Ok((Policy::DenyAll, None, None));
    }
    if let Some(file) = &args.policy {
        let (lisp, _) = boot(paths, cli.no_init, LispOutput::Stderr).await?;
        let source = format!(
            "(fennel.dofile {})",
            crate::catalog::fennel_string(&file.display().to_string())
        );
        let values = lisp
            .eval(&source, "policy")
            .await
            .map_err(|e| anyhow::anyhow!("the policy {}: {e}", file.display()))?;
        let Some(mlua::Value::Function(f)) = values.into_iter().next() else {
            anyhow::bail!(
                "the policy {} must evaluate to a function (fn [request] …)",
                file.display()
            );
        };
        let handler = crate::bind::client::permission_handler(&lisp, f)?;
        return Ok((Policy::Ask, Some(handler), Some(lisp)));
    }
    if args.no_wait || std::fs::File::open("/dev/tty").is_err() {
        return Ok((Policy::ApproveReads, None, None));
    }
    let ask = crate::bind::client::terminal_permission_handler();
    Ok((Policy::Ask, Some(front::reads_or(ask)), None))
}

/// How the owner starts the agent: `--agent`'s command line, or the name resolved in the image
/// (`client.resolve-agent`: client.defagent, then the catalog).
async fn resolve(
    paths: &Paths,
    no_init: bool,
    args: &AskArgs,
    key: Key,
    persistent: bool,
) -> Result<OwnerSpec, AskError> {
    let agent = match &args.agent {
        Some(line) => AgentCommand::parse(line).map_err(|e| AskError::Agent(e.to_string()))?,
        None => resolve_name(paths, no_init, &key.agent).await?,
    };
    Ok(OwnerSpec {
        key,
        agent,
        persistent,
        state_dir: paths.state.clone(),
        runtime_dir: paths.runtime.clone(),
    })
}

async fn resolve_name(paths: &Paths, no_init: bool, name: &str) -> Result<AgentCommand, AskError> {
    let (lisp, _) = boot(paths, no_init, LispOutput::Stderr)
        .await
        .map_err(|e| AskError::Agent(e.to_string()))?;
    resolve_in(&lisp, name).await
}

/// The command of the agent named `name` in the image `lisp` (`client.resolve-agent`).
pub(super) async fn resolve_in(lisp: &Lisp, name: &str) -> Result<AgentCommand, AskError> {
    let agent_error = |e: &dyn std::fmt::Display| AskError::Agent(e.to_string());
    let value = lisp
        .call_json("client.resolve-agent", &[json!(name)], &Default::default())
        .await
        .map_err(|e| agent_error(&e))?;
    let args = value["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let env = value["env"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let command = value["command"].as_str().ok_or_else(|| {
        AskError::Agent(format!("client.resolve-agent gave no command for {name}"))
    })?;
    Ok(AgentCommand {
        command: command.to_owned(),
        args,
        env,
    })
}

fn usage(why: &str) -> i32 {
    err!("oml ask: {why}");
    status::USAGE
}
