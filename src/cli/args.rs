//! The command line's grammar: clap's derive definitions of every flag and subcommand. Parsing
//! only; what each mode does is in `modes`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "oml",
    version,
    about = "A programmable coding-agent harness, extended in Fennel",
    long_about = "A programmable coding-agent harness, extended in Fennel.\n\n\
                  With no command, oml opens a chat with the agent in this directory (input that\n\
                  starts with `(` is Fennel, `/name` a slash command, `,help` lists the keys).\n\
                  `oml repl` is the pure Fennel REPL. `oml -p PROMPT…` runs one prompt headless\n\
                  (`oml -p --help` lists its flags)."
)]
pub struct Cli {
    /// Do not load the user init file (~/.config/oml/init.fnl) or any project init file.
    #[arg(long, global = true)]
    pub no_init: bool,

    /// Print one JSON value (or, in print mode, one JSON event per line) instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// Never ask anything at start-up (the offer to configure a discovered agent), even on a
    /// terminal.
    #[arg(long, global = true)]
    pub no_input: bool,

    /// How commands are confined (default: the setting sandbox.mode, workspace-write); `off`
    /// runs them unconfined.
    #[arg(long, global = true, value_name = "MODE", value_parser = SANDBOX_MODES)]
    pub sandbox: Option<String>,

    /// The chat: go on with the latest session of this directory.
    #[arg(short = 'c', long = "continue", conflicts_with_all = ["resume", "session"])]
    pub continue_: bool,

    /// The chat: pick one of the recent sessions of this directory to go on with.
    #[arg(long, conflicts_with = "session")]
    pub resume: bool,

    /// The chat: go on with the stored session ID.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,

    /// The chat: go on with a new fork of the stored session ID (its whole history; the
    /// session ID itself is left as it is).
    #[arg(long, value_name = "ID", conflicts_with_all = ["continue_", "resume", "session", "no_session"])]
    pub fork: Option<String>,

    /// The chat: the model of its sessions (default: llm.model, $OPENAI_MODEL).
    #[arg(long, value_name = "ID")]
    pub model: Option<String>,

    /// The chat: the permission mode (default: the setting agent.permission-mode).
    #[arg(long, value_parser = ["ask", "accept-edits", "yolo", "read-only"])]
    pub mode: Option<String>,

    /// The chat: do not store its sessions.
    #[arg(long, conflicts_with_all = ["continue_", "resume", "session"])]
    pub no_session: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one prompt headless and print the answer, like -p (see `oml -p --help`).
    Prompt {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Evaluate a Fennel expression and print its value.
    Eval {
        /// The expression, e.g. '(+ 1 2)'.
        expr: String,
    },
    /// Run a Fennel program; its arguments are in the `arg` table, (os.exit n) sets the status.
    Run {
        file: PathBuf,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Trust DIR (default: the current directory): its .oml/init.fnl may run, as it is now.
    Trust { dir: Option<PathBuf> },
    /// Stop trusting DIR (default: the current directory).
    Untrust { dir: Option<PathBuf> },
    /// List the stored sessions of this directory (--all: of every directory), latest first;
    /// `oml sessions export` writes one out.
    Sessions {
        /// List the sessions of every directory.
        #[arg(long)]
        all: bool,
        #[command(subcommand)]
        action: Option<SessionsAction>,
    },
    /// Serve the Agent Client Protocol (ACP v1) on stdin/stdout, for editors (Zed, Emacs, ...).
    ///
    /// stdout carries only protocol; logs and Lisp output go to stderr. The line cap is
    /// $OML_ACP_MAX_LINE_BYTES (default 64 MiB). With --listen, serve ACP's remote transport
    /// (Streamable HTTP and WebSocket on /acp) instead: stdout then says where, and each
    /// connection is served by an `oml acp` of its own.
    Acp(AcpArgs),
    /// List the known ACP agents, which are on PATH, and the Fennel that would configure them.
    ///
    /// Looks on PATH for the catalog's command names only; installs, downloads and changes
    /// nothing. --json prints one JSON object for scripts.
    Agents {
        /// Print the catalog as the Markdown table of docs/src/agents.md.
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
    },
    /// Choose a provider and a model and write them to the user init file (the first-run
    /// set-up), then exit. Editors run it in a terminal for oml's ACP auth method `oml-setup`.
    Setup,
    /// The pure Fennel REPL; --connect attaches to the live REPL of a running oml process,
    /// --listen serves one from this process.
    Repl {
        /// Connect to SOCKET (default: the most recently started server).
        #[arg(long, value_name = "SOCKET", num_args = 0..=1, default_missing_value = "")]
        connect: Option<String>,
        /// Serve a REPL socket from this process until stdin closes; prints the socket path.
        #[arg(long, conflicts_with = "connect")]
        listen: bool,
        /// With --listen: the socket path (default: $XDG_RUNTIME_DIR/oml/repl-<pid>.sock).
        #[arg(long, requires = "listen")]
        socket: Option<PathBuf>,
    },
    /// Run a program in oml's command sandbox and exit with its status: how `oml acp` runs a
    /// command in an editor's terminal (see docs/src/safety.md). Not for people.
    #[command(hide = true, name = "sandbox-exec")]
    SandboxExec(SandboxExecArgs),
    /// Prompt an ACP agent from the shell, in a session kept alive between prompts.
    ///
    /// `oml ask AGENT PROMPT…` sends the prompt to the persistent session of AGENT in this
    /// directory (-s NAME: a named one) and prints the agent's text, its tool calls and
    /// `[done] <stop reason>`. AGENT is a catalog name (`oml agents`), a client.defagent name, or
    /// `--agent 'COMMAND ARGS'` in its place. Words after AGENT: `exec PROMPT…` (a one-shot
    /// session), `status`, `cancel`, `sessions [list|new|close|show|history]`. Options come
    /// before the prompt or the word. Exit status: 0 end_turn, 1 the agent failed, 2 usage,
    /// 3 refusal, 4 max_turn_requests, 5 max_tokens, 130 cancelled.
    Ask(AskArgs),
    /// Send one prompt to several ACP agents at once, each in a git worktree of its own.
    ///
    /// `oml compare AGENT… -- PROMPT…` (or `--file F`): each AGENT (a catalog name, a
    /// client.defagent name, or `oml` itself) works in a new worktree of this repository's HEAD
    /// on a branch oml/AGENT, all in parallel; then a table of their stop reasons, times, tokens,
    /// costs and changes (--json: an array of one object per agent). The worktrees are kept for
    /// you to inspect and merge (`/worktrees`). Exit status: 0 every agent ended its turn, 1 a
    /// worktree or an agent failed, 2 usage, 3 an agent stopped otherwise, 130 interrupted.
    Compare(CompareArgs),
    /// Serve ACP on stdio in front of another agent, every message through Lisp steps.
    ///
    /// `oml proxy AGENT` (a catalog or client.defagent name) or `oml proxy -- COMMAND ARGS…`;
    /// with no AGENT, a component of a proxy chain under a conductor (proxy/successor).
    /// Each message passes through `proxy.to-agent` or `proxy.to-client` and its method's step
    /// (`proxy.on-prompt`, `proxy.on-permission`, …), which the init file or the live REPL
    /// redefines or advises (docs/src/proxy.md). stdout carries only protocol.
    Proxy {
        /// An agent's name (`client.defagent` or the catalog).
        #[arg(value_name = "AGENT", conflicts_with = "command")]
        agent: Option<String>,
        /// After `--`: the agent's command and its arguments, whatever their number.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
}

/// `oml ask`'s options (see `oml ask --help`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AskArgs {
    /// The agent's command line, in place of AGENT (split like a shell's words).
    #[arg(long, value_name = "COMMAND")]
    pub agent: Option<String>,
    /// The session's name (default: `default`).
    #[arg(short = 's', long = "session", value_name = "NAME")]
    pub session: Option<String>,
    /// Read the prompt from PATH.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Queue the prompt and return at once (permissions: --approve-reads unless another is given).
    #[arg(long)]
    pub no_wait: bool,
    /// Seconds the session's owner keeps the agent after the last prompt.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub ttl: u64,
    /// Print only the agent's final text.
    #[arg(long)]
    pub quiet: bool,
    /// Allow reads and searches; ask on a terminal, else reject, anything else (the default).
    #[arg(long, group = "permissions")]
    pub approve_reads: bool,
    /// Allow every permission request.
    #[arg(long, group = "permissions")]
    pub approve_all: bool,
    /// Reject every permission request.
    #[arg(long, group = "permissions")]
    pub deny_all: bool,
    /// A Fennel file whose value is the permission handler, as client.connect's :on-permission.
    #[arg(long, value_name = "FILE.fnl", group = "permissions")]
    pub policy: Option<PathBuf>,
    /// The session's model (its config option `model`, else session/set_model).
    #[arg(long, value_name = "ID")]
    pub model: Option<String>,
    /// The session's mode (session/set_mode).
    #[arg(long, value_name = "ID")]
    pub mode: Option<String>,
    /// A session config option (`true`/`false` are booleans), repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// AGENT (unless --agent), then the prompt or a word: exec, status, cancel, sessions.
    #[arg(value_name = "AGENT")]
    pub agent_name: Option<String>,
    #[arg(
        value_name = "PROMPT",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub words: Vec<String>,
}

/// `oml compare`'s options (see `oml compare --help`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CompareArgs {
    /// Read the prompt from PATH (after the words given after `--`, if any).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Allow reads and searches; ask on a terminal, else reject, anything else (the default).
    #[arg(long, group = "permissions")]
    pub approve_reads: bool,
    /// Allow every permission request.
    #[arg(long, group = "permissions")]
    pub approve_all: bool,
    /// Reject every permission request.
    #[arg(long, group = "permissions")]
    pub deny_all: bool,
    /// The agents, by name; the same name twice gets two worktrees.
    #[arg(value_name = "AGENT", required = true)]
    pub agents: Vec<String>,
    /// After `--`: the prompt's words.
    #[arg(last = true, value_name = "PROMPT")]
    pub prompt: Vec<String>,
}

/// `oml acp`'s options for the remote transport.
#[derive(Debug, clap::Args, Default)]
pub struct AcpArgs {
    /// Listen on ADDR (HOST:PORT; port 0 picks one) for ACP over HTTP and WebSocket at /acp.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// The bearer token clients must send, from FILE, which must lie in a folder the sandbox
    /// hides from commands (the runtime folder) (default: one is made and printed on stdout,
    /// never written anywhere).
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub token_file: Option<PathBuf>,
    /// The TLS certificate chain (PEM) for https:// and wss://.
    #[arg(long, value_name = "FILE", requires_all = ["listen", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// The TLS private key (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["listen", "tls_cert"])]
    pub tls_key: Option<PathBuf>,
    /// Listen on an address other than loopback without TLS (the token then travels in clear).
    #[arg(long, requires = "listen")]
    pub allow_plain_http: bool,
    /// `setup`: run `oml setup` instead of serving. An editor running the terminal auth method
    /// appends its arguments (`setup`) to the agent's command, `oml acp`; the ACP registry's
    /// documentation has them replace it, giving `oml setup`. Both work.
    #[arg(value_parser = ["setup"], hide = true, conflicts_with = "listen")]
    pub then: Option<String>,
}

/// `oml sandbox-exec`: the sandbox `oml acp` computed from its `sandbox.*` settings, spelt out
/// (in these flags, or the same flags as a JSON array in the environment variable
/// `OML_SANDBOX`, which keeps the editor's terminal title short), and the program to run in it.
#[derive(clap::Args, Debug, Clone)]
pub struct SandboxExecArgs {
    /// The setting `sandbox.mode`; without it, the flags come from `OML_SANDBOX`, and without
    /// that nothing runs.
    #[arg(long = "mode", value_parser = SANDBOX_MODES)]
    pub mode: Option<String>,
    /// A folder (or file) the command may write beneath, under workspace-write.
    #[arg(long = "writable", value_name = "PATH")]
    pub writable: Vec<PathBuf>,
    /// A folder that stays read-only even beneath a writable path (oml's own folders).
    #[arg(long = "protect", value_name = "PATH")]
    pub protect: Vec<PathBuf>,
    /// A path the command may not read or list (`sandbox.deny-read`).
    #[arg(long = "deny-read", value_name = "PATH")]
    pub deny_read: Vec<PathBuf>,
    /// A path in the workspace that stays read-only where the kernel allows (`.oml`, git's
    /// hooks and config).
    #[arg(long = "guard", value_name = "PATH")]
    pub guard: Vec<PathBuf>,
    /// TCP connections and listening allowed (`sandbox.network?`).
    #[arg(long = "network")]
    pub network: bool,
    /// An environment variable removed whatever its name looks like (the API key's).
    #[arg(long = "secret", value_name = "NAME")]
    pub secret: Vec<String>,
    /// `sandbox.keep-env`.
    #[arg(long = "keep-env", value_name = "NAME")]
    pub keep_env: Vec<String>,
    /// `sandbox.drop-env`.
    #[arg(long = "drop-env", value_name = "NAME")]
    pub drop_env: Vec<String>,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true)]
    pub argv: Vec<String>,
}

/// Print mode's grammar: `oml -p [FLAGS] [PROMPT…]` and `oml prompt [FLAGS] [PROMPT…]`, flags and
/// words in any order (`--` ends the flags). No words, or `-`, read the prompt from stdin; words
/// with piped stdin send both.
#[derive(Parser, Debug, Default)]
#[command(
    name = "oml -p",
    version,
    about = "Run one prompt headless: the answer on stdout, notices on stderr",
    after_help = "Exit status: 0 the turn finished; 1 an error; 2 a usage error; 3 the model \
                  failed; 4 the turn limit (--max-turns) was reached; 5 the model's output limit \
                  was reached; 6 finished, but the session could not be saved; 130 interrupted \
                  (Ctrl-C); 129, 143 ended by SIGHUP, SIGTERM; 141 stdout was closed."
)]
pub struct PrintArgs {
    /// Print mode (this flag, or the `prompt` command, selects this grammar).
    #[arg(short = 'p', long = "print")]
    pub print: bool,

    /// The prompt's words, joined with spaces; `-` (or none) reads the prompt from stdin.
    #[arg(value_name = "PROMPT")]
    pub words: Vec<String>,

    /// Write one JSON event per line (docs: "Print mode") instead of text.
    #[arg(long)]
    pub json: bool,

    /// The permission mode (default: the setting agent.print-mode-permission, accept-edits).
    #[arg(long, value_parser = ["ask", "accept-edits", "yolo", "read-only"])]
    pub mode: Option<String>,

    /// How commands are confined (default: the setting sandbox.mode, workspace-write); `off`
    /// runs them unconfined.
    #[arg(long, value_name = "MODE", value_parser = SANDBOX_MODES)]
    pub sandbox: Option<String>,

    /// The model id for this prompt's session (default: llm.model, $OPENAI_MODEL).
    #[arg(long, value_name = "ID")]
    pub model: Option<String>,

    /// Model calls this prompt may make (default: the setting agent.max-turns).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,

    /// Text added at the end of the system prompt (may be given several times).
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Vec<String>,

    /// A file whose text is added at the end of the system prompt (may be given several times).
    #[arg(long, value_name = "FILE")]
    pub append_system_prompt_file: Vec<PathBuf>,

    /// Show the model's reasoning too (text output).
    #[arg(long)]
    pub show_thinking: bool,

    /// Go on with the latest session in this directory (a new one if there is none).
    #[arg(short = 'c', long = "continue", conflicts_with_all = ["session", "no_session"])]
    pub continue_: bool,

    /// Go on with the stored session ID.
    #[arg(long, value_name = "ID", conflicts_with = "no_session")]
    pub session: Option<String>,

    /// Go on with a new fork of the stored session ID (its whole history; ID is left as it is).
    #[arg(long, value_name = "ID", conflicts_with_all = ["session", "continue_", "no_session"])]
    pub fork: Option<String>,

    /// Do not store the session.
    #[arg(long)]
    pub no_session: bool,

    /// Do not load the user init file or any project init file.
    #[arg(long)]
    pub no_init: bool,

    /// Never ask anything (print mode never does; accepted for symmetry with `oml`).
    #[arg(long)]
    pub no_input: bool,
}

/// The values of `--sandbox` (the setting `sandbox.mode`).
const SANDBOX_MODES: [&str; 3] = ["workspace-write", "read-only", "off"];

/// What `oml sessions` does with a stored session.
#[derive(Subcommand, Debug)]
pub enum SessionsAction {
    /// Write the stored session ID (of any directory) as a trajectory document: ATIF, the
    /// Agent Trajectory Interchange Format of Harbor (Terminal-Bench), with its sub-agents'
    /// trajectories embedded.
    ///
    /// To stdout, or to --output FILE with the images the session holds written beside it, in
    /// FILE's name with `.images` for its extension. Secrets are out as in the session file.
    Export {
        /// The format: `atif` (the only one).
        #[arg(long, value_enum, default_value = "atif")]
        format: ExportFormat,
        /// Write to FILE instead of stdout, and its images to a folder beside it: FILE.json
        /// puts them in FILE.images/.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        /// The session's id, as `oml sessions` lists it.
        id: String,
    },
}

/// The formats `oml sessions export` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// ATIF (Harbor's Agent Trajectory Interchange Format, v1.7).
    Atif,
}

/// The short flags of [`PrintArgs`] that take no value, which may be clustered (`-pc`).
const PRINT_SHORT_FLAGS: &[char] = &['p', 'c'];

/// The subcommands other than `prompt`: their own arguments are never read as print mode's
/// (`oml run build.fnl -p` runs `build.fnl` with `-p` in its `arg` table).
const SUBCOMMANDS: &[&str] = &[
    "eval",
    "run",
    "trust",
    "untrust",
    "sessions",
    "acp",
    "agents",
    "repl",
    "help",
    "sandbox-exec",
    "compare",
];

/// When `args` (without the program name) ask for print mode, the arguments for [`PrintArgs`]:
/// `-p`/`--print` before `--` and before any other subcommand's name (alone or in a cluster such
/// as `-cp`), or `prompt` as the first word (which is then dropped). `None` for every other mode.
pub fn print_mode_args(args: &[std::ffi::OsString]) -> Option<Vec<std::ffi::OsString>> {
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let flags: Vec<&String> = text
        .iter()
        .take_while(|a| *a != "--" && !SUBCOMMANDS.contains(&a.as_str()))
        .collect();
    let is_print = |a: &&String| {
        *a == "-p"
            || *a == "--print"
            || (a.len() > 2
                && a.starts_with('-')
                && !a.starts_with("--")
                && a.contains('p')
                && a[1..].chars().all(|c| PRINT_SHORT_FLAGS.contains(&c)))
    };
    if flags.iter().any(is_print) {
        return Some(args.to_vec());
    }
    let first_word = text.iter().position(|a| !a.starts_with('-'))?;
    (text[first_word] == "prompt" && first_word < flags.len()).then(|| {
        let mut rest = args.to_vec();
        rest.remove(first_word);
        rest.insert(0, "--print".into());
        rest
    })
}
