//! The command line: parse arguments with clap (`args`), boot the Lisp host (`boot`), run the
//! chosen mode (`modes`).
//!
//! Every mode returns an exit status to `main.rs`, the only place that exits. Modes:
//! `oml` (the terminal chat), `oml repl` (the interactive Fennel REPL), `oml eval EXPR`, `oml run FILE [ARGS…]`, `oml trust [DIR]`,
//! `oml untrust [DIR]`, `oml agents`, `oml sessions`, `oml acp`, `oml repl --connect [SOCKET]`,
//! `oml repl --listen`, `oml ask`, `oml proxy`, print mode (`oml -p TEXT`, `oml prompt TEXT`, see `front::print`), and
//! the hidden sandbox launcher `oml sandbox-exec` (`launch`).
//!
//! This layer wires things together; it holds no behaviour of its own beyond argument handling
//! and the messages a terminal user sees.

mod agents;
mod args;
mod ask;
mod boot;
mod compare;
mod export;
mod launch;
mod modes;
mod proxy;
mod setup;

use clap::Parser as _;

pub use args::{AskArgs, Cli, Command, PrintArgs, SandboxExecArgs, SessionsAction};
pub use boot::boot;

use crate::front::stdio::err;
use crate::paths::Paths;

/// Exit statuses (see docs/src/getting-started.md).
pub mod status {
    pub const OK: i32 = 0;
    pub const ERROR: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const INTERRUPTED: i32 = crate::front::print::INTERRUPTED;
}

/// Parse the arguments and run; returns the process exit status.
pub fn main() -> i32 {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // An `oml ask` session's owner, started by `oml ask` with its spec on stdin.
    if argv.get(1).is_some_and(|a| a == crate::ask::OWNER_ARG) {
        init_logging();
        return ask::owner();
    }
    let parsed = match args::print_mode_args(argv.get(1..).unwrap_or_default()) {
        Some(rest) => {
            let name = argv.first().cloned().unwrap_or_else(|| "oml".into());
            PrintArgs::try_parse_from(std::iter::once(name).chain(rest)).map(Mode::Print)
        }
        None => Cli::try_parse_from(&argv).map(Mode::Other),
    };
    let mode = match parsed {
        Ok(mode) => mode,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                status::USAGE
            } else {
                status::OK
            };
        }
    };
    init_logging();
    // The sandbox launcher runs one program and nothing else: no runtime, no Lisp.
    if let Mode::Other(Cli {
        command: Some(Command::SandboxExec(args)),
        ..
    }) = &mode
    {
        return launch::sandbox_exec(args);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            err!("oml: cannot start the async runtime: {e}");
            return status::ERROR;
        }
    };
    let code = runtime.block_on(async {
        match run(mode).await {
            Ok(code) => code,
            Err(e) => {
                err!("oml: {e:#}");
                status::ERROR
            }
        }
    });
    runtime.shutdown_background();
    // Agents a program started and never closed go with it, launchers' children included.
    crate::acp_client::process::kill_remaining_groups();
    code
}

/// What is logged when `OML_LOG` is unset: warnings, but none from the MCP SDK, whose failures
/// oml reports to the session itself (a notice, `/mcp`, the tool result).
const DEFAULT_LOG_FILTER: &str = "warn,rmcp=off";

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("OML_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: editors show an agent's stderr raw.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .try_init();
}

/// What the arguments ask for: print mode has a grammar of its own.
enum Mode {
    Print(PrintArgs),
    Other(Cli),
}

async fn run(mode: Mode) -> anyhow::Result<i32> {
    let paths = Paths::from_env();
    let cli = match mode {
        Mode::Print(args) => return modes::print(&paths, &args).await,
        Mode::Other(cli) => cli,
    };
    match &cli.command {
        // `print_mode_args` turns `oml prompt …` into print mode before clap sees it; this is
        // only reached in odd spellings such as `oml -- prompt …`.
        Some(Command::Prompt { words }) => {
            let args = PrintArgs {
                print: true,
                words: words.clone(),
                no_init: cli.no_init,
                json: cli.json,
                ..PrintArgs::default()
            };
            modes::print(&paths, &args).await
        }
        None => modes::chat(&paths, &cli).await,
        Some(Command::Acp(args)) if args.then.is_some() => setup::run(&paths, cli.no_init).await,
        Some(Command::Acp(args)) if args.listen.is_some() => {
            modes::acp_listen(cli.no_init, cli.sandbox.as_deref(), args).await
        }
        Some(Command::Acp(_)) => modes::acp(&paths, cli.no_init, cli.sandbox.as_deref()).await,
        Some(Command::Agents { markdown }) => Ok(agents::list(cli.json, *markdown)),
        Some(Command::Setup) => setup::run(&paths, cli.no_init).await,
        Some(Command::Sessions {
            action: Some(SessionsAction::Export { output, id, .. }),
            ..
        }) => Ok(export::run(&paths, id, output.as_deref())),
        Some(Command::Sessions { all, action: None }) => {
            Ok(modes::list_sessions(&paths, *all, cli.json))
        }
        Some(Command::Eval { expr }) => modes::eval(&paths, &cli, expr).await,
        Some(Command::Run { file, args }) => modes::run_file(&paths, &cli, file, args).await,
        Some(Command::Trust { dir }) => modes::trust(&paths, dir.clone()),
        Some(Command::Untrust { dir }) => modes::untrust(&paths, dir.clone()),
        Some(Command::Repl {
            connect: Some(socket),
            ..
        }) => modes::repl_connect(&paths, socket).await,
        Some(Command::Repl {
            listen: true,
            socket,
            ..
        }) => modes::repl_listen(&paths, &cli, socket.clone()).await,
        Some(Command::Repl { .. }) => modes::repl(&paths, &cli).await,
        Some(Command::SandboxExec(args)) => Ok(launch::sandbox_exec(args)),
        Some(Command::Ask(args)) => ask::ask(&paths, &cli, args).await,
        Some(Command::Compare(args)) => compare::compare(&paths, &cli, args).await,
        Some(Command::Proxy { agent, command }) => {
            let agent = match (agent, command.as_slice()) {
                (Some(name), _) => proxy::Agent::Named(name.clone()),
                (None, []) => proxy::Agent::Chain,
                (None, words) => proxy::Agent::Command(words.to_vec()),
            };
            proxy::proxy(&paths, cli.no_init, agent).await
        }
    }
}
