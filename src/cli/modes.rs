//! The modes of the command line, one function each: what `oml`, `oml eval`, `oml run`,
//! `oml trust`, `oml untrust`, `oml sessions`, `oml acp`, `oml repl` and print mode do once the
//! arguments are parsed (`oml agents` and the agent offer are in `super::agents`). Each returns
//! an exit status.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::boot::{boot, new_host, report_lisp_error, set_arg_table};
use super::{Cli, PrintArgs, status};
use crate::agent::Agent;
use crate::cancel::CancelToken;
use crate::front::print::SessionChoice;
use crate::front::repl::client;
use crate::front::repl::server::ReplServer;
use crate::front::repl::terminal;
use crate::front::stdio::{err, out};
use crate::lisp::init::{self, InitReport, TrustStore};
use crate::lisp::{Lisp, Output};
use crate::paths::Paths;
use crate::session::store::Store;

/// `oml` with no command: the terminal chat (with the agent offer on a terminal). The chat's
/// Lisp surface is installed before the init files, so that they can restyle it.
pub(super) async fn chat(paths: &Paths, cli: &Cli) -> anyhow::Result<i32> {
    warm_up_http();
    let lisp = new_host(paths, Output::Stdout)?;
    let hub = crate::front::chat::surface::install(&lisp).context("cannot install the chat")?;
    super::boot::load_inits(&lisp, paths, cli.no_init).await;
    if is_terminal() && !cli.no_init && !cli.no_input {
        super::agents::offer_agents(&lisp, paths).await;
        if cli.model.is_none() {
            offer_model(&lisp, paths).await;
        }
    }
    if is_terminal() {
        // Agents driven from the chat's Lisp without a permission handler ask here.
        crate::bind::client::ask_on_terminal(true);
    }
    set_sandbox(&lisp, cli.sandbox.as_deref())?;
    let agent = Agent::of(&lisp).context("the agent is not installed")?;
    let start = if cli.continue_ {
        crate::front::chat::Start::Continue
    } else if cli.resume {
        crate::front::chat::Start::Pick
    } else if let Some(id) = &cli.session {
        crate::front::chat::Start::Id(id.clone())
    } else if let Some(parent) = &cli.fork {
        crate::front::chat::Start::Id(fork_stored(paths, parent)?)
    } else {
        crate::front::chat::Start::New
    };
    let options = crate::front::chat::ChatOptions {
        start,
        store: (!cli.no_session).then(|| Store::new(paths.sessions_dir())),
        model: cli.model.clone(),
        mode: cli.mode.clone(),
        history: Some(paths.chat_history_file()),
    };
    let code = crate::front::chat::run(&agent, hub, options).await;
    crate::bind::mcp::stop_all(agent.lisp()).await;
    Ok(code)
}

/// `oml repl`: the interactive Fennel REPL (with the agent offer on a terminal).
pub(super) async fn repl(paths: &Paths, cli: &Cli) -> anyhow::Result<i32> {
    let (lisp, _) = boot(paths, cli.no_init, Output::Stdout).await?;
    set_sandbox(&lisp, cli.sandbox.as_deref())?;
    let size: i64 = lisp.setting("repl.history-size").unwrap_or(1000);
    if is_terminal() && !cli.no_init && !cli.no_input {
        super::agents::offer_agents(&lisp, paths).await;
    }
    if is_terminal() {
        out!("{}", terminal::banner());
        // Agents driven from this REPL without a permission handler ask here.
        crate::bind::client::ask_on_terminal(true);
    }
    terminal::interactive(&lisp, Some(paths.history_file()), size.max(0) as usize).await?;
    Ok(status::OK)
}

/// `oml eval EXPR`: print the value of one expression.
pub(super) async fn eval(paths: &Paths, cli: &Cli, expr: &str) -> anyhow::Result<i32> {
    let (lisp, _) = boot(paths, cli.no_init, Output::Stdout).await?;
    set_sandbox(&lisp, cli.sandbox.as_deref())?;
    match lisp.eval_to_string(expr, "eval", &CancelToken::new()).await {
        Ok(text) => {
            out!("{text}");
            Ok(status::OK)
        }
        Err(e) => Ok(report_lisp_error(&e)),
    }
}

/// `oml run FILE ARGS…`: run a Fennel program with `arg` set.
pub(super) async fn run_file(
    paths: &Paths,
    cli: &Cli,
    file: &Path,
    args: &[String],
) -> anyhow::Result<i32> {
    let (lisp, _) = boot(paths, cli.no_init, Output::Stdout).await?;
    set_sandbox(&lisp, cli.sandbox.as_deref())?;
    set_arg_table(&lisp, file, args)?;
    match lisp.load_file(file, &CancelToken::new()).await {
        Ok(()) => Ok(status::OK),
        Err(e) => Ok(report_lisp_error(&e)),
    }
}

/// `oml trust [DIR]`: record the project init file of DIR's project (its root, see
/// `project::find_root`) as trusted, as it is now.
pub(super) fn trust(paths: &Paths, dir: Option<PathBuf>) -> anyhow::Result<i32> {
    let dir = project_dir(absolute_dir(dir)?);
    let hash = TrustStore::new(paths.trust_file())
        .trust(&dir)
        .context("cannot record the trusted directory")?;
    let init = crate::paths::project_init(&dir);
    // The other agents' settings trust covers too, named so the user knows what runs.
    let setup: Vec<&str> = crate::paths::PROJECT_SETUP_FILES
        .into_iter()
        .filter(|name| std::fs::symlink_metadata(dir.join(name)).is_ok())
        .collect();
    let also = if setup.is_empty() {
        String::new()
    } else {
        format!("; and, as they are now, {}", setup.join(", "))
    };
    if init.is_file() {
        out!(
            "trusted {} ({} sha256 {}{also})",
            dir.display(),
            init.display(),
            &hash[..12]
        );
    } else {
        out!(
            "trusted {} (it has no .oml/init.fnl yet; trust it again once it has one{also})",
            dir.display()
        );
    }
    Ok(status::OK)
}

/// `oml untrust [DIR]`: forget the trust of DIR's project.
pub(super) fn untrust(paths: &Paths, dir: Option<PathBuf>) -> anyhow::Result<i32> {
    let dir = project_dir(absolute_dir(dir)?);
    let was = TrustStore::new(paths.trust_file())
        .untrust(&dir)
        .context("cannot update the trusted directories")?;
    if was {
        out!("untrusted {}", dir.display());
    } else {
        out!("{} was not trusted", dir.display());
    }
    Ok(status::OK)
}

/// `oml repl --connect [SOCKET]`: a terminal client of a running REPL server.
pub(super) async fn repl_connect(paths: &Paths, socket: &str) -> anyhow::Result<i32> {
    let socket = if socket.is_empty() {
        client::default_socket(paths).context(
            "no running oml REPL server found; start one (oml acp starts one, as does oml repl --listen) or name its socket",
        )?
    } else {
        PathBuf::from(socket)
    };
    client::connect(&socket).await?;
    Ok(status::OK)
}

/// `oml repl --listen`: serve a REPL socket until stdin closes or a signal comes.
pub(super) async fn repl_listen(
    paths: &Paths,
    cli: &Cli,
    socket: Option<PathBuf>,
) -> anyhow::Result<i32> {
    let (lisp, _) = boot(paths, cli.no_init, Output::Stdout).await?;
    let server = match socket {
        Some(path) => ReplServer::start_at(lisp, &path)?,
        None => ReplServer::start(lisp, paths).await?,
    };
    out!("{}", server.path().display());
    wait_for_stdin_eof_or_signal().await;
    drop(server);
    Ok(status::OK)
}

/// Interactive start-up without a model (`llm.model` unset): offer the providers and local
/// servers found, and apply the choice written to the user init file.
async fn offer_model(lisp: &Lisp, paths: &Paths) {
    let model: Option<String> = lisp.setting("llm.model").unwrap_or(None);
    if model.is_some() {
        return;
    }
    let client = crate::llm::LlmClient::new();
    let found = super::setup::candidates(&client).await;
    let init = paths.user_init();
    let result = {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        let mut output = std::io::stdout();
        super::setup::dialog(&client, &found, &init, &mut input, &mut output).await
    };
    match result {
        Ok(super::setup::Setup::Wrote { file, snippet }) => {
            if let Err(e) = lisp.eval(&snippet, "model setup").await {
                err!("oml: {}: {e}", file.display());
            }
        }
        Ok(_) => {}
        Err(e) => err!("oml: cannot offer a model: {e}"),
    }
}

/// Print mode: `oml -p PROMPT…` and `oml prompt PROMPT…`.
pub(super) async fn print(paths: &Paths, args: &PrintArgs) -> anyhow::Result<i32> {
    warm_up_http();
    let text = match prompt_text(&args.words).await {
        Ok(text) => text,
        Err(usage) => {
            err!("oml -p: {usage}");
            return Ok(status::USAGE);
        }
    };
    let mut appended = args.append_system_prompt.clone();
    for file in &args.append_system_prompt_file {
        match std::fs::read_to_string(file) {
            Ok(text) => appended.push(text),
            Err(e) => {
                err!("oml -p: cannot read {}: {e}", file.display());
                return Ok(status::USAGE);
            }
        }
    }
    let (lisp, _) = boot(paths, args.no_init, Output::Stderr).await?;
    set_sandbox(&lisp, args.sandbox.as_deref())?;
    if let Some(n) = args.max_turns {
        lisp.set_setting("agent.max-turns", &serde_json::json!(n))?;
    }
    if !appended.is_empty() {
        let text = appended.join("\n\n");
        lisp.set_setting("agent.append-system-prompt", &serde_json::json!(text))?;
    }
    let agent = Agent::of(&lisp).context("the agent is not installed")?;
    let options = crate::front::print::PrintOptions {
        text,
        json: args.json,
        mode: args.mode.clone(),
        model: args.model.clone(),
        show_thinking: args.show_thinking,
        session: if args.no_session {
            SessionChoice::None
        } else if args.continue_ {
            SessionChoice::Continue
        } else if let Some(id) = &args.session {
            SessionChoice::Id(id.clone())
        } else if let Some(parent) = &args.fork {
            SessionChoice::Id(fork_stored(paths, parent)?)
        } else {
            SessionChoice::New
        },
    };
    if !args.no_session {
        agent
            .sessions()
            .set_store(Some(Store::new(paths.sessions_dir())));
    }
    let code = crate::front::print::run(&agent, options).await;
    crate::bind::mcp::stop_all(agent.lisp()).await;
    Ok(code)
}

/// Bytes of piped stdin print mode reads at most; the rest is left unread and the prompt says so.
pub const STDIN_MAX_BYTES: usize = 10 * 1024 * 1024;

/// Why the command line gives no prompt (`oml -p`, `oml ask`); its text is the usage message.
#[derive(Debug, thiserror::Error)]
pub(super) enum NoPrompt {
    #[error("give the prompt as words (oml -p \"explain this\"), or pipe it in")]
    NotGiven,
    #[error("the prompt read from stdin is empty")]
    EmptyStdin,
    #[error("the prompt is empty")]
    Empty,
    #[error("cannot read the prompt from {}: {source}", path.display())]
    Unreadable {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("the prompt in {} is empty", .0.display())]
    EmptyFile(std::path::PathBuf),
    #[error("--set {0}: expected KEY=VALUE")]
    BadSet(String),
}

/// The prompt: the words; with none (or `-`), stdin; with words and piped stdin, the words and
/// then stdin's text, set apart and labelled.
pub(super) async fn prompt_text(words: &[String]) -> Result<String, NoPrompt> {
    use std::io::IsTerminal as _;
    let piped = !std::io::stdin().is_terminal();
    let only_stdin = words.is_empty() || (words.len() == 1 && words[0] == "-");
    if only_stdin {
        if !piped {
            return Err(NoPrompt::NotGiven);
        }
        let text = read_stdin().await;
        if text.trim().is_empty() {
            return Err(NoPrompt::EmptyStdin);
        }
        return Ok(text);
    }
    let mut text = words.join(" ");
    if text.trim().is_empty() {
        return Err(NoPrompt::Empty);
    }
    if piped {
        let input = read_stdin().await;
        if !input.trim().is_empty() {
            text.push_str("\n\n<stdin>\n");
            text.push_str(input.trim_end_matches('\n'));
            text.push_str("\n</stdin>");
        }
    }
    Ok(text)
}

/// Piped stdin as text (invalid UTF-8 replaced), at most [`STDIN_MAX_BYTES`], with a note when
/// there was more. A read error counts as the end.
async fn read_stdin() -> String {
    use tokio::io::AsyncReadExt as _;
    let mut bytes = Vec::new();
    let limit = (STDIN_MAX_BYTES + 1) as u64;
    let _ = tokio::io::stdin().take(limit).read_to_end(&mut bytes).await;
    let cut = bytes.len() > STDIN_MAX_BYTES;
    bytes.truncate(STDIN_MAX_BYTES);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if cut {
        text.push_str(&format!(
            "\n[stdin was longer than {STDIN_MAX_BYTES} bytes; only that much was read]"
        ));
    }
    text
}

/// `--fork ID`: a new stored session with the whole history of the stored session `parent`;
/// its id.
fn fork_stored(paths: &Paths, parent: &str) -> anyhow::Result<String> {
    let store = Store::new(paths.sessions_dir());
    if !store.exists(parent) {
        anyhow::bail!("no stored session {parent}");
    }
    let id = crate::session::store::new_id();
    crate::session::fork::fork(&store, parent, &id, None, None)
        .with_context(|| format!("cannot fork session {parent}"))?;
    Ok(id)
}

/// `oml sessions`: one line per stored session (id, last update, title), latest first, each
/// fork right under its parent, indented.
pub(super) fn list_sessions(paths: &Paths, all: bool, json: bool) -> i32 {
    let store = Store::new(paths.sessions_dir());
    let cwd = std::env::current_dir().ok();
    let list = store.list(if all { None } else { cwd.as_deref() });
    for (depth, s) in crate::session::fork::tree(&list) {
        if json {
            out!(
                "{}",
                serde_json::json!({"id": s.id, "cwd": s.cwd.display().to_string(),
                                   "title": s.title, "updated": s.updated_at,
                                   "parent": s.parent, "fork_prompt": s.fork_prompt})
            );
            continue;
        }
        let indent = if depth == 0 {
            String::new()
        } else {
            format!("{}└ ", "  ".repeat(depth))
        };
        let place = if all {
            format!("  {}", s.cwd.display())
        } else {
            String::new()
        };
        let fork = match (&s.parent, s.fork_prompt) {
            (None, _) => String::new(),
            (Some(_), Some(n)) => format!("  (fork of prompt {n})"),
            (Some(_), None) => "  (fork)".to_owned(),
        };
        out!(
            "{indent}{}  {}{place}  {}{fork}",
            s.id,
            s.updated_at,
            s.title.as_deref().unwrap_or("")
        );
    }
    if list.is_empty() && !json {
        err!("no sessions{}", if all { "" } else { " in this directory" });
    }
    status::OK
}

/// `oml acp`: the ACP agent on stdio, with the live REPL beside it.
/// `--sandbox MODE`: the setting `sandbox.mode`, after the init files (the flag wins).
fn set_sandbox(lisp: &Lisp, mode: Option<&str>) -> anyhow::Result<()> {
    if let Some(mode) = mode {
        lisp.set_setting("sandbox.mode", &serde_json::json!(mode))?;
    }
    Ok(())
}

pub(super) async fn acp(
    paths: &Paths,
    no_init: bool,
    sandbox: Option<&str>,
) -> anyhow::Result<i32> {
    // The editor's `initialize` is answered while the image is built.
    let mut opened = crate::front::acp::open_stdio(crate::front::acp::max_line_bytes_from_env());
    opened.first_answer().await;
    let lisp = new_host(paths, Output::Stderr)?;
    // After the image (which the early `initialize` answer does not wait for), before the first
    // `session/new` lists the models.
    warm_up_http();
    let hub = crate::front::acp::install(&lisp).context("cannot install the ACP agent")?;
    // Project init files run per session, in the session's directory.
    let report = if no_init {
        InitReport::default()
    } else {
        init::load_all(&lisp, paths, None, true).await
    };
    for line in report.messages() {
        tracing::info!("{line}");
    }
    set_sandbox(&lisp, sandbox)?;
    let agent = Agent::of(&lisp).context("the agent is not installed")?;
    let repl = if lisp.setting::<bool>("repl.server?").unwrap_or(true) {
        match ReplServer::start(lisp.clone(), paths).await {
            Ok(server) => Some(server),
            Err(e) => {
                tracing::warn!("cannot start the live REPL server: {e}");
                None
            }
        }
    } else {
        None
    };
    let options = crate::front::acp::ServeOptions {
        paths: paths.clone(),
        no_init,
        startup_messages: report.messages(),
    };
    let code = crate::front::acp::serve(agent, hub, options, opened).await;
    drop(repl);
    Ok(code)
}

/// `oml acp --listen`: ACP's remote transport, each connection served by an `oml acp` with
/// this one's flags (see [`crate::front::listen`]). Prints where it listens and the token it
/// made (unless `--token-file` gave one) on stdout, then serves until a signal.
pub(super) async fn acp_listen(
    no_init: bool,
    sandbox: Option<&str>,
    args: &super::args::AcpArgs,
) -> anyhow::Result<i32> {
    let exe = std::env::current_exe().context("cannot find oml's own executable")?;
    let mut agent_args = vec!["acp".to_owned()];
    if no_init {
        agent_args.push("--no-init".to_owned());
    }
    if let Some(mode) = sandbox {
        agent_args.extend(["--sandbox".to_owned(), mode.to_owned()]);
    }
    let options = crate::front::listen::ListenOptions {
        addr: args.listen.context("--listen is required")?,
        token_file: args.token_file.clone(),
        tls_cert: args.tls_cert.clone(),
        tls_key: args.tls_key.clone(),
        allow_plain_http: args.allow_plain_http,
        agent: crate::acp_client::Spawn {
            command: exe.display().to_string(),
            args: agent_args,
            ..Default::default()
        },
    };
    let listening = crate::front::listen::start(options).await?;
    out!("listening {}", listening.url);
    if let Some(token) = &listening.made_token {
        out!("token {token}");
    }
    listening.run().await;
    Ok(0)
}

/// The project root of `dir` (the nearest directory with `.git` or `.oml/`), else `dir`: where
/// its `.oml/init.fnl` is looked for.
fn project_dir(dir: PathBuf) -> PathBuf {
    crate::project::find_root(&dir).unwrap_or(dir)
}

fn absolute_dir(dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let dir = match dir {
        Some(d) if d.is_absolute() => d,
        Some(d) => cwd.join(d),
        None => cwd,
    };
    anyhow::ensure!(dir.is_dir(), "{} is not a directory", dir.display());
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

fn is_terminal() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

async fn wait_for_stdin_eof_or_signal() {
    use tokio::io::AsyncReadExt as _;
    let mut signals = crate::front::signals::Shutdown::listen();
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 256];
    let eof = async {
        loop {
            match stdin.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    tokio::select! {
        _ = eof => {}
        _ = signals.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// The modes that talk to a model build the HTTP client (the root certificates) on a thread of
/// its own while the image loads, for the configuration the environment gives
/// (`LlmConfig::from_env`: `OPENAI_BASE_URL`, else the default endpoint); an init file that
/// points `llm.base-url` elsewhere gets its client built at the first call.
fn warm_up_http() {
    let config = crate::llm::LlmConfig::from_env();
    let roots = crate::llm::client::Roots::for_url(&config.base_url);
    crate::llm::client::warm_up(config.connect_timeout, roots);
}
