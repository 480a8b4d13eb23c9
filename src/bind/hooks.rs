//! The `hook` namespace's host functions: the hooks of the settings files for a session's
//! directory (`hook.settings`, with whether each may run: a project's only while it is
//! trusted), Claude Code's matchers (`hook.matches?`) and running a list of handlers at once
//! (`hook.run`). What events there are, when they fire and what their answers do is Lisp's
//! (`src/agent/hooks.fnl`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Lua, Table, Value};
use parking_lot::Mutex;
use serde::Deserialize;

use crate::hooks::command::CommandHook;
use crate::hooks::http::HttpHook;
use crate::hooks::output::{self, Parsed};
use crate::hooks::{DEFAULT_HOOK_TIMEOUT, End, HookRun};
use crate::lisp::{HostFn, Lisp, LispError, create_async_function, define, from_lua, to_lua};
use crate::paths::Paths;
use crate::project::setup::hooks::{HookGroup, hook_groups};
use crate::project::setup::settings_files;

/// How long one reading of the settings files is reused for a directory: hooks fire on every
/// tool call, and a changed file is seen this much later at most.
pub const SETTINGS_TTL: Duration = Duration::from_secs(2);

/// The largest number of compiled matchers kept.
pub const MAX_MATCHERS: usize = 256;

/// The most memory one matcher may compile to; a bigger one (`\w{1000}`) is refused as
/// invalid rather than compiled for seconds.
pub const MAX_MATCHER_BYTES: usize = 1 << 20;

/// A reading of the settings for a directory: when, and its number (the Lua table made of it
/// is reused while the number is the same: `crate::bind::reused`).
type Reading = (Instant, u64);
static READINGS: std::sync::LazyLock<Mutex<HashMap<PathBuf, Reading>>> =
    std::sync::LazyLock::new(Mutex::default);
/// The number of the next reading.
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
static MATCHERS: std::sync::LazyLock<Mutex<HashMap<String, Option<regex::Regex>>>> =
    std::sync::LazyLock::new(Mutex::default);

pub fn install(lisp: &Lisp) -> Result<(), LispError> {
    define(lisp.lua(), "hook", HOOK_FNS)?;
    Ok(())
}

const HOOK_FNS: &[HostFn] = &[
    HostFn {
        name: "settings",
        args: "dir",
        doc: "The settings files for a session in DIR and their hooks: \
              {:files [{:path :origin :problem}] :groups [{:event :matcher :handlers :source \
              :origin :project? :place :skipped}] :problems [{:source :message}]}. Files: \
              ~/.claude/settings.json ($CLAUDE_CONFIG_DIR), ~/.codex/hooks.json ($CODEX_HOME), \
              settings.json in oml's config folder, and the project's .claude/settings.json, \
              .claude/settings.local.json and .codex/hooks.json. A project's group has \
              :skipped (why) while the project is not trusted (`project.trusted?`). A handler \
              is {:type :command :command :timeout :keep-env} or {:type :http :url :headers \
              :timeout} or {:type :unsupported :kind}. Reused for 2 s (the same table: treat it \
              as read-only).",
        make: |lua| lua.create_function(|lua, dir: String| settings_table(lua, Path::new(&dir))),
    },
    HostFn {
        name: "matches?",
        args: "matcher subject",
        doc: "Whether Claude Code's MATCHER (a regular expression matched against the whole \
              SUBJECT, a tool name; nil, \"\" and \"*\" match everything) matches SUBJECT. An \
              invalid expression, or one that compiles to more than 1 MiB, matches nothing: \
              returns false and why.",
        make: |lua| {
            lua.create_function(|_, (matcher, subject): (Option<String>, String)| {
                Ok(matches(matcher.as_deref(), &subject))
            })
        },
    },
    HostFn {
        name: "transcript-path",
        args: "session-id",
        doc: "The file SESSION-ID's session is stored in (a hook's `transcript_path`), or nil \
              when sessions are not stored.",
        make: |lua| {
            lua.create_function(|lua, id: Option<String>| {
                let Some(id) = id else { return Ok(None) };
                let sessions = lua.app_data_ref::<Arc<crate::session::Sessions>>();
                Ok(sessions
                    .and_then(|s| s.store())
                    .map(|store| store.path(&id).display().to_string()))
            })
        },
    },
    HostFn {
        name: "run",
        args: "handlers input dir ?env",
        doc: "Run the hook HANDLERS (as `hook.settings` gives them) at once, each given INPUT \
              (a table, sent as JSON) in DIR with the variables of ?ENV (a table of strings) \
              set, after oml's secrets are removed from the environment (the secret rules (`sandbox.keep-env`, `sandbox.drop-env`); a \
              command's :keep-env names ones it keeps). Waits for all; returns their results in \
              order: {:end :exit :stdout :stderr :ms :output :invalid :why}, :end one of \
              :exited :timed-out :cancelled :failed, :output the JSON answer as a table when \
              stdout is one, :invalid why when it looks like one but is not.",
        make: |lua| create_async_function(lua, run_handlers),
    },
];

/// `hook.settings`: the reading of `dir`, fresh within [`SETTINGS_TTL`]; the same table while
/// it is (hooks look at it on every tool call).
fn settings_table(lua: &Lua, dir: &Path) -> mlua::Result<Table> {
    let slot = format!("hook-settings\0{}", dir.display());
    let fresh = READINGS
        .lock()
        .get(dir)
        .filter(|(at, _)| at.elapsed() < SETTINGS_TTL)
        .map(|(_, n)| *n);
    let n = fresh.unwrap_or_else(|| {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        READINGS
            .lock()
            .insert(dir.to_path_buf(), (Instant::now(), n));
        n
    });
    crate::bind::reused::reused_table(lua, &slot, n, || {
        let lisp = Lisp::from_lua(lua).ok_or_else(|| rt("no Lisp host"))?;
        match to_lua(lua, &read_settings(&lisp, dir))? {
            Value::Table(t) => Ok(t),
            _ => Err(rt("the settings are not a table")),
        }
    })
}

/// The files and hook groups for `dir`, a project's groups marked when it is not trusted.
fn read_settings(lisp: &Lisp, dir: &Path) -> serde_json::Value {
    let files = settings_files(&Paths::from_env().config, dir);
    let (groups, problems) = hook_groups(&files);
    let root = crate::project::find_root(dir).unwrap_or_else(|| dir.to_path_buf());
    // Trust is checked on the bytes just read, so a file changed meanwhile is not trusted.
    let given: Vec<(&str, &[u8])> = files
        .iter()
        .filter_map(|f| Some((f.origin.project_file()?, f.bytes.as_slice())))
        .collect();
    let untrusted = (!given.is_empty())
        .then(|| crate::bind::project::untrusted_given(lisp, &root, &given))
        .flatten();
    let group = |g: &HookGroup| {
        let mut v = serde_json::to_value(g).unwrap_or_default();
        v["project?"] = g.origin.project().into();
        if let (Some(why), true) = (&untrusted, g.origin.project()) {
            v["skipped"] = why.clone().into();
        }
        v
    };
    serde_json::json!({
        "files": files.iter().map(|f| {
            let mut file = serde_json::json!({"path": f.path, "origin": f.origin});
            if let Err(why) = &f.value {
                file["problem"] = why.to_string().into();
            }
            file
        }).collect::<Vec<_>>(),
        "groups": groups.iter().map(group).collect::<Vec<_>>(),
        "problems": problems,
    })
}

/// Whether `matcher` matches all of `subject`; false and why for an invalid one.
fn matches(matcher: Option<&str>, subject: &str) -> (bool, Option<String>) {
    let pattern = match matcher.map(str::trim) {
        None | Some("") | Some("*") => return (true, None),
        Some(p) => p,
    };
    let mut cache = MATCHERS.lock();
    if cache.len() >= MAX_MATCHERS {
        cache.clear();
    }
    let compiled = cache.entry(pattern.to_owned()).or_insert_with(|| {
        regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .size_limit(MAX_MATCHER_BYTES)
            .build()
            .ok()
    });
    match compiled {
        Some(re) => (re.is_match(subject), None),
        None => (
            false,
            Some(format!(
                "the matcher {pattern:?} is not a regular expression (of at most {MAX_MATCHER_BYTES} bytes compiled)"
            )),
        ),
    }
}

/// A handler as `hook.settings` gives it (and a Lisp caller may build).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
enum Handler {
    #[serde(rename_all = "kebab-case")]
    Command {
        command: String,
        timeout: Option<f64>,
        #[serde(default)]
        keep_env: Vec<String>,
    },
    Http {
        url: String,
        #[serde(default)]
        headers: std::collections::BTreeMap<String, String>,
        timeout: Option<f64>,
    },
    Unsupported {
        kind: String,
    },
}

type RunArgs = (Value, Value, String, Option<Table>);

/// `hook.run`: every handler at once, their results in order.
async fn run_handlers(lua: Lua, (handlers, input, dir, env): RunArgs) -> mlua::Result<Table> {
    let handlers: Vec<Handler> = serde_json::from_value(from_lua(&lua, handlers)?)
        .map_err(|e| rt(&format!("hook.run: bad handlers: {e}")))?;
    let input = serde_json::to_vec(&from_lua(&lua, input)?).map_err(mlua::Error::external)?;
    let mut vars = Vec::new();
    if let Some(env) = env {
        for pair in env.pairs::<String, String>() {
            vars.push(pair?);
        }
    }
    let lisp = Lisp::from_lua(&lua).ok_or_else(|| rt("no Lisp host"))?;
    let secrets = crate::bind::sandbox::secrets(&lisp).map_err(LispError::into_lua)?;
    let cancel = crate::bind::session::session_cancel(&lua);
    let dir = PathBuf::from(dir);
    let runs = handlers.iter().map(|h| {
        let (dir, vars, input, cancel) = (&dir, vars.clone(), input.clone(), cancel.clone());
        let mut secrets = secrets.clone();
        async move {
            let timeout = |t: &Option<f64>| {
                t.map(|s| Duration::from_secs_f64(s.clamp(0.001, 1e7)))
                    .unwrap_or(DEFAULT_HOOK_TIMEOUT)
            };
            match h {
                Handler::Command {
                    command,
                    timeout: t,
                    keep_env,
                } => {
                    secrets.keep.extend(keep_env.iter().cloned());
                    let environment = crate::sandbox::Prepared::unconfined().scrub_env(&secrets);
                    let hook = CommandHook {
                        command,
                        cwd: dir,
                        env: vars,
                        stdin: input,
                        timeout: timeout(t),
                    };
                    crate::hooks::command::run(hook, environment, &cancel).await
                }
                Handler::Http {
                    url,
                    headers,
                    timeout: t,
                } => {
                    let hook = HttpHook {
                        url,
                        headers,
                        body: input,
                        timeout: timeout(t),
                    };
                    crate::hooks::http::run(hook, &cancel).await
                }
                Handler::Unsupported { kind } => HookRun {
                    end: End::Failed(format!("oml does not run hooks of type {kind:?}")),
                    stdout: String::new(),
                    stderr: String::new(),
                    duration: Duration::ZERO,
                },
            }
        }
    });
    let results = futures_util::future::join_all(runs).await;
    let list = lua.create_table()?;
    for run in &results {
        list.push(run_table(&lua, run)?)?;
    }
    Ok(list)
}

/// One result as Lisp reads it.
fn run_table(lua: &Lua, run: &HookRun) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let (end, exit, why) = match &run.end {
        End::Exited(code) => ("exited", Some(*code), None),
        End::TimedOut => ("timed-out", None, None),
        End::Cancelled => ("cancelled", None, None),
        End::Failed(why) => ("failed", None, Some(why.as_str())),
    };
    t.set("end", end)?;
    t.set("exit", exit)?;
    t.set("why", why)?;
    t.set("stdout", run.stdout.as_str())?;
    t.set("stderr", run.stderr.as_str())?;
    t.set("ms", run.duration.as_secs_f64() * 1000.0)?;
    match output::parse(&run.stdout) {
        Parsed::Json(out) => {
            let json = serde_json::to_value(&*out).map_err(mlua::Error::external)?;
            t.set("output", to_lua(lua, &json)?)?;
        }
        Parsed::Invalid(why) => t.set("invalid", why)?,
        Parsed::Text => {}
    }
    Ok(t)
}

fn rt(msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(msg.to_owned())
}
