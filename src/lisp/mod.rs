//! The Lisp host: one Lua 5.4 state running Fennel, shared by every task of the process.
//!
//! `Lisp` is a cheap, cloneable handle (`Send + Sync`). It owns the embedded Fennel compiler and
//! the prelude (both precompiled to bytecode by `build.rs`), compiles user files with a per-file
//! cache keyed by content hash, runs Lisp in coroutines so that Rust futures can be awaited from
//! Lisp (`create_async_function`), and interrupts runaway forms with an instruction-count hook.
//!
//! Rust reaches Lisp only *by name at call time* (`call`, `function`): it never keeps a Lisp
//! function across calls, so a redefinition or an advice takes effect on the next call.
//!
//! This module does not know about models, tools, sessions or ACP; those modules put their own
//! functions and settings into the namespace tables through this API.

mod convert;
pub mod init;
pub mod repl;

use std::collections::HashMap;
use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mlua::chunk::ChunkMode;
use mlua::{
    FromLuaMulti, Function, HookTriggers, IntoLuaMulti, Lua, LuaOptions, MultiValue, StdLib, Table,
    Value, VmState,
};
use sha2::{Digest, Sha256};

use crate::cancel::CancelToken;

pub use convert::{from_lua, to_lua};

static FENNEL_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fennel.luac"));
/// Fennel's built-in macros as bytecode, which the embedded `fennel.lua` loads from the global
/// `__oml_fennel_macros` instead of parsing their source at every start (see build.rs).
static FENNEL_MACROS: &[&[u8]] = include!(concat!(env!("OUT_DIR"), "/fennel_macros.rs"));
const FENNEL_MACROS_GLOBAL: &str = "__oml_fennel_macros";
static PRELUDE_MACROS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_macros.luac"));
static PRELUDE_CORE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_core.luac"));

/// The prelude's Fennel source, so that `source` works on built-in functions too.
const PRELUDE_SOURCES: &[(&str, &str)] = &[
    (
        "src/lisp/prelude/macros.fnl",
        include_str!("prelude/macros.fnl"),
    ),
    (
        "src/lisp/prelude/core.fnl",
        include_str!("prelude/core.fnl"),
    ),
];

/// `lua.create_async_function`, interruptible: while the function waits, an interrupt of the
/// REPL form that called it (Ctrl-C, or the client hanging up) ends the wait with the error
/// `interrupted`, as the instruction hook does for running Lisp. Every waiting host function is
/// made with this, so Ctrl-C also stops a form blocked on an agent, the model or a sleep.
/// Dropping the wait drops its future, which cancels what it was doing.
pub fn create_async_function<F, A, FR, R>(lua: &Lua, func: F) -> mlua::Result<Function>
where
    F: Fn(Lua, A) -> FR + Send + 'static,
    A: mlua::FromLuaMulti,
    FR: Future<Output = mlua::Result<R>> + Send + 'static,
    R: mlua::IntoLuaMulti,
{
    lua.create_async_function(move |lua: Lua, args: A| {
        let interrupt = Lisp::from_lua(&lua).and_then(|lisp| lisp.interrupt_of(&lua.current_thread()));
        let fut = func(lua, args);
        async move {
            match interrupt {
                None => fut.await,
                Some(interrupt) => tokio::select! {
                    r = fut => r,
                    () = interrupt.interrupted() => Err(mlua::Error::RuntimeError("interrupted".into())),
                },
            }
        }
    })
}

/// How many VM instructions run between two checks of the interrupt flag. Small enough that an
/// interrupt lands within microseconds, large enough that the check costs nothing measurable.
pub const HOOK_INSTRUCTIONS: u32 = 1000;

/// Where `print` from Lisp goes when no sink is attached to the running coroutine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The REPL, `oml eval` and `oml run`: stdout is the user's.
    Stdout,
    /// `oml acp`: stdout belongs to the protocol, so Lisp output goes to stderr.
    Stderr,
}

/// How to build the host.
#[derive(Clone, Debug)]
pub struct LispOptions {
    pub output: Output,
    /// Where compiled Fennel is cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
}

/// Errors at the boundary of the Lisp host.
#[derive(Debug, thiserror::Error)]
pub enum LispError {
    /// A parse or compile error, already prefixed with `file:line:col:` by Fennel.
    #[error("{0}")]
    Compile(String),
    /// A runtime error; the message starts with `file:line:` when the code came from a file.
    #[error("{0}")]
    Runtime(String),
    #[error("interrupted")]
    Interrupted,
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A setting that is missing or holds a value of the wrong type.
    #[error("{0}")]
    Setting(String),
}

impl From<mlua::Error> for LispError {
    fn from(e: mlua::Error) -> Self {
        classify(&e)
    }
}

/// The marker error raised inside Lua when an evaluation is interrupted.
#[derive(Debug)]
struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

fn classify(e: &mlua::Error) -> LispError {
    match e {
        mlua::Error::CallbackError { cause, .. } => classify(cause),
        mlua::Error::WithContext { cause, .. } => classify(cause),
        mlua::Error::ExternalError(inner) if inner.is::<Interrupted>() => LispError::Interrupted,
        mlua::Error::RuntimeError(msg) | mlua::Error::SyntaxError { message: msg, .. } => {
            if msg.contains("interrupted") && msg.ends_with("interrupted") {
                LispError::Interrupted
            } else {
                LispError::Runtime(msg.clone())
            }
        }
        other => LispError::Runtime(other.to_string()),
    }
}

/// A sink for the output of one coroutine (a REPL client, for instance).
pub type Sink = tokio::sync::mpsc::UnboundedSender<String>;

struct Shared {
    output: Output,
    cache_dir: Option<PathBuf>,
    /// Output sinks by coroutine (the Lua thread pointer).
    sinks: Mutex<HashMap<usize, Sink>>,
    /// The interrupt of each REPL conversation, by its coroutine.
    interrupts: Mutex<HashMap<usize, repl::Interrupt>>,
    /// Embedded sources registered by other modules (see `register_source`).
    sources: Mutex<Vec<(&'static str, &'static str)>>,
}

/// The handle to the one Lisp state of the process.
#[derive(Clone)]
pub struct Lisp {
    lua: Lua,
    shared: Arc<Shared>,
}

impl Lisp {
    /// Build the state: standard libraries (with `debug`, which Fennel needs), Fennel, the host
    /// functions and the prelude. Fast: everything is loaded from bytecode.
    pub fn new(options: LispOptions) -> Result<Lisp, LispError> {
        // SAFETY: the `debug` library is what makes this constructor unsafe in mlua's terms;
        // Fennel needs it for metadata and tracebacks, and oml's Lisp code is trusted like an
        // Emacs init file (project files run only once their directory is trusted).
        let lua =
            unsafe { Lua::unsafe_new_with(StdLib::ALL_SAFE | StdLib::DEBUG, LuaOptions::new()) };
        let shared = Arc::new(Shared {
            output: options.output,
            cache_dir: options.cache_dir,
            sinks: Mutex::new(HashMap::new()),
            interrupts: Mutex::new(HashMap::new()),
            sources: Mutex::new(Vec::new()),
        });
        lua.set_app_data(shared.clone());
        // Generational collection: a streaming turn makes a few short-lived tables per token
        // (events, their renderings), which the young generation frees cheaply; the incremental
        // collector kept re-marking the long-lived prelude instead. It cut the CPU time per
        // `session/update` by about a quarter in `benches/acp.rs`. `(collectgarbage :incremental)`
        // from an init file switches back.
        lua.gc_set_mode(mlua::state::GcMode::Generational(
            mlua::state::GcGenParams::default(),
        ));
        let lisp = Lisp { lua, shared };
        lisp.boot()?;
        Ok(lisp)
    }

    fn boot(&self) -> Result<(), LispError> {
        let lua = &self.lua;
        let chunks = lua.create_table()?;
        for chunk in FENNEL_MACROS {
            chunks.raw_push(lua.create_string(chunk)?)?;
        }
        lua.globals().raw_set(FENNEL_MACROS_GLOBAL, chunks)?;
        let fennel: Table = lua
            .load(FENNEL_BYTECODE)
            .set_name("@fennel.lua")
            .set_mode(ChunkMode::Binary)
            .call(())?;
        lua.globals().raw_set(FENNEL_MACROS_GLOBAL, Value::Nil)?;
        let loaded: Table = lua.globals().get::<Table>("package")?.get("loaded")?;
        loaded.set("fennel", &fennel)?;
        lua.globals().set("fennel", &fennel)?;

        self.install_host_functions()?;

        // The macros are compiled at build time; they run in the compiler's environment, which
        // gives them `sym`, `list` and friends.
        let env = lua.create_table()?;
        let mangle: Function = fennel.get("mangle")?;
        for name in [
            "sym",
            "list",
            "sequence",
            "sym?",
            "list?",
            "table?",
            "sequence?",
            "multi-sym?",
            "varg?",
            "comment?",
            "ast-source",
            "view",
        ] {
            let v = fennel.get::<Value>(name)?;
            let mangled: String = mangle.call(name)?;
            env.set(mangled, v.clone())?;
            env.set(name, v)?;
        }
        let meta = lua.create_table()?;
        meta.set("__index", lua.globals())?;
        env.set_metatable(Some(meta))?;
        let macros: Table = lua
            .load(PRELUDE_MACROS)
            .set_name("@src/lisp/prelude/macros.fnl")
            .set_mode(ChunkMode::Binary)
            .set_environment(env)
            .call(())?;
        let make_scope: Function = fennel.get("scope")?;
        let scope: Table = make_scope.call(())?;
        let scope_macros: Table = scope.get("macros")?;
        for pair in macros.pairs::<Value, Value>() {
            let (k, v) = pair?;
            scope_macros.set(k, v)?;
        }
        lua.set_named_registry_value("oml.scope", scope)?;

        let compiler: Function = lua
            .load(COMPILER_LUA)
            .set_name("=oml-compiler")
            .call(&fennel)?;
        lua.set_named_registry_value("oml.compile", compiler)?;

        lua.load(PRELUDE_CORE)
            .set_name("@src/lisp/prelude/core.fnl")
            .set_mode(ChunkMode::Binary)
            .exec()?;
        Ok(())
    }

    fn install_host_functions(&self) -> Result<(), LispError> {
        let lua = &self.lua;
        let globals = lua.globals();
        let oml = lua.create_table()?;

        let shared = self.shared.clone();
        let print = lua.create_function(move |lua, args: MultiValue| {
            let mut line = String::new();
            for (i, v) in args.iter().enumerate() {
                if i > 0 {
                    line.push('\t');
                }
                line.push_str(&v.to_string()?);
            }
            line.push('\n');
            let key = lua.current_thread().to_pointer() as usize;
            let sink = shared.sinks.lock().ok().and_then(|s| s.get(&key).cloned());
            match sink {
                Some(sink) => {
                    let _ = sink.send(line);
                }
                None => write_default(shared.output, &line),
            }
            Ok(())
        })?;
        globals.set("print", print)?;
        if self.shared.output == Output::Stderr {
            // `io.write` and `io.stdout` must never reach the protocol stream.
            let io: Table = globals.get("io")?;
            let stderr: Value = io.get("stderr")?;
            io.set("stdout", stderr.clone())?;
            let output: Function = io.get("output")?;
            output.call::<()>(stderr)?;
        }

        oml.set(
            "log",
            lua.create_function(|_, msg: String| {
                let _ = writeln!(std::io::stderr().lock(), "[oml] {msg}");
                Ok(())
            })?,
        )?;
        oml.set(
            "read-file",
            lua.create_function(|_, path: String| Ok(std::fs::read_to_string(path).ok()))?,
        )?;
        let shared = self.shared.clone();
        oml.set(
            "embedded-source",
            lua.create_function(move |_, name: String| {
                let found = PRELUDE_SOURCES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, s)| *s);
                Ok(found.or_else(|| {
                    shared
                        .sources
                        .lock()
                        .ok()
                        .and_then(|extra| extra.iter().find(|(n, _)| *n == name).map(|(_, s)| *s))
                }))
            })?,
        )?;
        oml.set(
            "sha256",
            lua.create_function(|_, s: mlua::LuaString| Ok(sha256_hex(&s.as_bytes())))?,
        )?;
        oml.set(
            "sleep",
            create_async_function(lua, |_, ms: f64| async move {
                tokio::time::sleep(Duration::from_secs_f64(ms.max(0.0) / 1000.0)).await;
                Ok(())
            })?,
        )?;
        let exit = lua.create_function(|_, code: Option<Value>| -> mlua::Result<()> {
            let code = match code {
                None | Some(Value::Nil) | Some(Value::Boolean(true)) => 0,
                Some(Value::Boolean(false)) => 1,
                Some(Value::Integer(i)) => i as i32,
                Some(Value::Number(n)) => n as i32,
                Some(_) => 1,
            };
            Err(mlua::Error::external(ExitRequest(code)))
        })?;
        // Only `main.rs` exits the process: `os.exit` unwinds to the caller, which maps it to a
        // status.
        globals.get::<Table>("os")?.set("exit", exit)?;
        globals.set("oml", oml)?;
        convert::install_json(lua)?;
        Ok(())
    }

    /// The handle of the host that owns `lua`, for host functions that need the whole host (a
    /// function gets the state; keeping a `Lisp` inside it would keep the state alive forever).
    pub fn from_lua(lua: &Lua) -> Option<Lisp> {
        let shared = lua.app_data_ref::<Arc<Shared>>()?.clone();
        Some(Lisp {
            lua: lua.clone(),
            shared,
        })
    }

    /// The underlying Lua state, for modules that register their own host functions.
    pub fn lua(&self) -> &Lua {
        &self.lua
    }

    /// Route `print` from the coroutine `thread` to `sink` until `detach_sink` is called.
    pub fn attach_sink(&self, thread: &mlua::Thread, sink: Sink) {
        if let Ok(mut sinks) = self.shared.sinks.lock() {
            sinks.insert(thread.to_pointer() as usize, sink);
        }
    }

    pub fn detach_sink(&self, thread: &mlua::Thread) {
        if let Ok(mut sinks) = self.shared.sinks.lock() {
            sinks.remove(&(thread.to_pointer() as usize));
        }
    }

    /// Let `interrupt` end the waits of async host functions called from the coroutine
    /// `thread` (a REPL conversation), until `detach_interrupt`.
    pub fn attach_interrupt(&self, thread: &mlua::Thread, interrupt: repl::Interrupt) {
        if let Ok(mut interrupts) = self.shared.interrupts.lock() {
            interrupts.insert(thread.to_pointer() as usize, interrupt);
        }
    }

    pub fn detach_interrupt(&self, thread: &mlua::Thread) {
        if let Ok(mut interrupts) = self.shared.interrupts.lock() {
            interrupts.remove(&(thread.to_pointer() as usize));
        }
    }

    fn interrupt_of(&self, thread: &mlua::Thread) -> Option<repl::Interrupt> {
        let interrupts = self.shared.interrupts.lock().ok()?;
        interrupts.get(&(thread.to_pointer() as usize)).cloned()
    }

    /// Compile Fennel source to a Lua function without running it. `name` is the chunk name used
    /// in error messages and by `source` (a file path, or something like `eval`).
    pub fn compile(&self, src: &str, name: &str) -> Result<Function, LispError> {
        compile_in(&self.lua, src, name)
    }

    fn load_lua(&self, lua_src: &str, name: &str) -> Result<Function, LispError> {
        self.lua
            .load(lua_src)
            .set_name(format!("@{name}"))
            .into_function()
            .map_err(|e| LispError::Compile(format!("{name}: {}", compile_message(&e))))
    }

    /// Compile a file, using the compiled-Lua cache when the file's content has been seen.
    pub fn compile_file(&self, path: &Path) -> Result<Function, LispError> {
        let src = std::fs::read_to_string(path).map_err(|source| LispError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let name = path.display().to_string();
        let Some(cache) = &self.shared.cache_dir else {
            return self.compile(&src, &name);
        };
        let key = sha256_hex(
            format!(
                "oml {}\0{}\0{}\0{}\0{}\0{}",
                env!("CARGO_PKG_VERSION"),
                include_str!(concat!(env!("OUT_DIR"), "/fennel_path.txt")),
                // The Fennel compiler, the prelude's macros and the options they compile with:
                // a change to any of them changes the compiled output.
                include_str!(concat!(env!("OUT_DIR"), "/compiler_id.txt")),
                COMPILER_LUA,
                name,
                src
            )
            .as_bytes(),
        );
        let cached = cache.join(format!("{key}.lua"));
        if let Ok(lua_src) = std::fs::read_to_string(&cached) {
            return self.load_lua(&lua_src, &name);
        }
        let compiler: Function = self.lua.named_registry_value("oml.compile")?;
        let scope: Table = self.lua.named_registry_value("oml.scope")?;
        let lua_src: String = compiler
            .call((src.as_str(), name.as_str(), scope))
            .map_err(|e| LispError::Compile(compile_message(&e)))?;
        let f = self.load_lua(&lua_src, &name)?;
        // A cache that cannot be written only costs speed.
        let _ = write_atomically(cache, &cached, lua_src.as_bytes());
        Ok(f)
    }

    /// Evaluate Fennel source; returns the values of its last form.
    pub async fn eval(&self, src: &str, name: &str) -> Result<MultiValue, LispError> {
        let f = self.compile(src, name)?;
        self.run(f, (), &CancelToken::new()).await
    }

    /// Evaluate Fennel source and render its values with `fennel.view` (what `oml eval` prints).
    pub async fn eval_to_string(
        &self,
        src: &str,
        name: &str,
        cancel: &CancelToken,
    ) -> Result<String, LispError> {
        let f = self.compile(src, name)?;
        let values = self.run(f, (), cancel).await?;
        self.view_values(values)
    }

    /// `fennel.view` of each value, separated by tabs.
    pub fn view_values(&self, values: MultiValue) -> Result<String, LispError> {
        let fennel: Table = self.lua.globals().get("fennel")?;
        let view: Function = fennel.get("view")?;
        let mut out = Vec::new();
        for v in values {
            out.push(view.call::<String>(v)?);
        }
        Ok(out.join("\t"))
    }

    /// Load and run a Fennel file.
    pub async fn load_file(&self, path: &Path, cancel: &CancelToken) -> Result<(), LispError> {
        let f = self.compile_file(path)?;
        self.run::<()>(f, (), cancel).await
    }

    /// Make `source` work on functions compiled from an embedded file `name` (a path relative to
    /// the crate root, as given to the compiler).
    pub fn register_source(&self, name: &'static str, text: &'static str) {
        if let Ok(mut extra) = self.shared.sources.lock() {
            extra.push((name, text));
        }
    }

    /// Run `f` in its own coroutine: async host functions may suspend it, and `cancel` interrupts
    /// it even inside a pure-Lisp loop (checked every `HOOK_INSTRUCTIONS` instructions).
    pub async fn run<R: FromLuaMulti>(
        &self,
        f: Function,
        args: impl IntoLuaMulti,
        cancel: &CancelToken,
    ) -> Result<R, LispError> {
        self.run_with(f, args, cancel, |_| ()).await
    }

    /// `run`, calling `setup` with the new coroutine before it starts, so that a caller can map
    /// the coroutine to its own context (the agent maps it to a session, as `attach_sink` maps
    /// it to an output sink).
    pub async fn run_with<R: FromLuaMulti>(
        &self,
        f: Function,
        args: impl IntoLuaMulti,
        cancel: &CancelToken,
        setup: impl FnOnce(&mlua::Thread),
    ) -> Result<R, LispError> {
        let thread = self.lua.create_thread(f)?;
        setup(&thread);
        let token = cancel.clone();
        thread.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS),
            move |_, _| {
                if token.is_cancelled() {
                    Err(mlua::Error::external(Interrupted))
                } else {
                    Ok(VmState::Continue)
                }
            },
        )?;
        let fut = thread.into_async::<R>(args)?;
        tokio::select! {
            r = fut => r.map_err(|e| exit_or(classify_exit(&e), e)),
            _ = cancel.cancelled() => Err(LispError::Interrupted),
        }
    }

    /// The function `ns.name` as it is *now* (late binding), or `None`.
    pub fn function(&self, qualified: &str) -> Result<Option<Function>, LispError> {
        match self.lookup(qualified)? {
            Value::Function(f) => Ok(Some(f)),
            Value::Table(t)
                if t.metatable()
                    .is_some_and(|m| m.contains_key("__call").unwrap_or(false)) =>
            {
                let call: Function = t.metatable().expect("checked").get("__call")?;
                Ok(Some(call.bind(t)?))
            }
            _ => Ok(None),
        }
    }

    /// The value named by a dotted path from the globals (`agent.max-turns`), or nil.
    pub fn lookup(&self, qualified: &str) -> Result<Value, LispError> {
        let mut current = Value::Table(self.lua.globals());
        for part in qualified.split('.') {
            current = match current {
                Value::Table(t) => t.raw_get(part)?,
                _ => return Ok(Value::Nil),
            };
        }
        Ok(current)
    }

    /// Call the function named `qualified` with JSON arguments and convert its first result
    /// back to JSON. The name is resolved at call time.
    pub async fn call_json(
        &self,
        qualified: &str,
        args: &[serde_json::Value],
        cancel: &CancelToken,
    ) -> Result<serde_json::Value, LispError> {
        let f = self
            .function(qualified)?
            .ok_or_else(|| LispError::Runtime(format!("{qualified} is not a function")))?;
        let mut lua_args = MultiValue::new();
        for a in args {
            lua_args.push_back(to_lua(&self.lua, a)?);
        }
        let v: Value = self.run(f, lua_args, cancel).await?;
        Ok(from_lua(&self.lua, v)?)
    }

    /// Declare a setting from Rust (the same registry `defsetting` writes).
    pub fn declare_setting(&self, decl: &SettingDecl) -> Result<(), LispError> {
        let oml: Table = self.lua.globals().get("oml")?;
        let define: Function = oml.get("defsetting*")?;
        let opts = self.lua.create_table()?;
        let ty = to_lua(&self.lua, &decl.ty)?;
        opts.set("type", ty)?;
        opts.set("doc", decl.doc)?;
        opts.set("secret", decl.secret)?;
        opts.set("file", decl.file)?;
        opts.set("line", decl.line)?;
        let default = self.setting_value(&decl.default)?;
        define.call::<()>((decl.name, default, opts))?;
        Ok(())
    }

    /// The current value of a setting, deserialized; an unknown setting or a value of the wrong
    /// shape is an error that names the setting.
    pub fn setting<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T, LispError> {
        let oml: Table = self.lua.globals().get("oml")?;
        let check: Function = oml.get("check-setting")?;
        let value = self.lookup(name)?;
        if let Some(problem) = check.call::<Option<String>>((name, value.clone()))? {
            return Err(LispError::Setting(problem));
        }
        let json = from_lua(&self.lua, value)?;
        serde_json::from_value(json).map_err(|e| LispError::Setting(format!("{name}: {e}")))
    }

    /// Set a setting from Rust, with the same validation as `setq`.
    pub fn set_setting(&self, name: &str, value: &serde_json::Value) -> Result<(), LispError> {
        let oml: Table = self.lua.globals().get("oml")?;
        let set: Function = oml.get("set-setting!")?;
        let v = self.setting_value(value)?;
        set.call::<Value>((name, v))?;
        Ok(())
    }

    /// A setting's value from JSON. A top-level `null` is nil, the "no value" of an optional
    /// (`string?`) setting; `json.null` is only for nulls inside JSON data.
    fn setting_value(&self, value: &serde_json::Value) -> mlua::Result<Value> {
        match value {
            serde_json::Value::Null => Ok(Value::Nil),
            v => to_lua(&self.lua, v),
        }
    }

    /// Put `dir` on the module search path (`require`) and the macro search path, once.
    pub fn add_load_path(&self, dir: &Path) -> Result<(), LispError> {
        let f: Function = self
            .lua
            .load(ADD_LOAD_PATH_LUA)
            .set_name("=oml-load-path")
            .into_function()?;
        f.call::<()>(dir.display().to_string())?;
        Ok(())
    }

    /// Install the module searcher that compiles `.fnl` modules through the cache.
    pub fn install_searcher(&self) -> Result<(), LispError> {
        let me = self.clone();
        let find = self.lua.create_function(move |lua, path: String| {
            match me.compile_file(Path::new(&path)) {
                Ok(f) => Ok((Value::Function(f), Value::Nil)),
                Err(e) => Ok((Value::Nil, Value::String(lua.create_string(e.to_string())?))),
            }
        })?;
        let install: Function = self
            .lua
            .load(SEARCHER_LUA)
            .set_name("=oml-searcher")
            .into_function()?;
        install.call::<()>(find)?;
        Ok(())
    }
}

/// `Lisp::compile` for host functions, which get the state as `&Lua` rather than a `Lisp`.
pub fn compile_in(lua: &Lua, src: &str, name: &str) -> Result<Function, LispError> {
    let compiler: Function = lua.named_registry_value("oml.compile")?;
    let scope: Table = lua.named_registry_value("oml.scope")?;
    let lua_src: String = compiler
        .call((src, name, scope))
        .map_err(|e| LispError::Compile(compile_message(&e)))?;
    lua.load(&lua_src)
        .set_name(format!("@{name}"))
        .into_function()
        .map_err(|e| LispError::Compile(format!("{name}: {}", compile_message(&e))))
}

/// A setting declared by a Rust module.
pub struct SettingDecl {
    pub name: &'static str,
    pub doc: &'static str,
    /// A type name (`"integer"`, `"string?"`, ...) or an array of allowed values.
    pub ty: serde_json::Value,
    /// The initial value; `null` means nil.
    pub default: serde_json::Value,
    pub secret: bool,
    pub file: &'static str,
    pub line: u32,
}

/// `(os.exit n)` inside Lisp: unwinds to the caller, which turns it into an exit status.
#[derive(Debug, Clone, Copy)]
pub struct ExitRequest(pub i32);

impl std::fmt::Display for ExitRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}", self.0)
    }
}

impl std::error::Error for ExitRequest {}

fn classify_exit(e: &mlua::Error) -> Option<i32> {
    match e {
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => {
            classify_exit(cause)
        }
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<ExitRequest>().map(|x| x.0),
        _ => None,
    }
}

fn exit_or(code: Option<i32>, e: mlua::Error) -> LispError {
    match code {
        Some(c) => LispError::Runtime(format!("{EXIT_PREFIX}{c}")),
        None => classify(&e),
    }
}

/// `os.exit` is reported as a runtime error with this prefix; `exit_status` recognises it.
const EXIT_PREFIX: &str = "oml: exit requested with status ";

impl LispError {
    /// The status requested by `(os.exit n)`, when that is what ended the evaluation.
    pub fn exit_status(&self) -> Option<i32> {
        match self {
            LispError::Runtime(m) => m.strip_prefix(EXIT_PREFIX).and_then(|s| s.parse().ok()),
            _ => None,
        }
    }
}

/// The useful part of an error from Lisp: the innermost message, without Lua's traceback.
pub fn clean_error(message: &str) -> String {
    let inner = match message.rfind("runtime error: ") {
        Some(i) => &message[i + "runtime error: ".len()..],
        None => message,
    };
    let inner = inner.split("\nstack traceback:").next().unwrap_or(inner);
    inner.trim().to_owned()
}

fn compile_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => compile_message(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

fn write_default(output: Output, text: &str) {
    match output {
        Output::Stdout => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        Output::Stderr => {
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        }
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest.iter() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Write `bytes` to `path` through a temp file in `dir` and a rename, so readers never see half.
pub(crate) fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Compiles Fennel with the options every oml file uses: metadata on (docstrings for `doc`),
/// Lua lines kept equal to Fennel lines (so errors and `source` point at the right line), and a
/// fresh child of the scope that holds oml's macros.
const COMPILER_LUA: &str = r#"
local fennel = ...
return function(src, filename, scope)
  return fennel.compileString(src, {
    filename = filename, correlate = true, useMetadata = true,
    scope = fennel.scope(scope),
    -- No terminal escape codes around the offending form: these messages reach log files,
    -- editors (as ACP text) and test output, not only terminals.
    ["error-pinpoint"] = false,
  })
end
"#;

const ADD_LOAD_PATH_LUA: &str = r#"
local dir = ...
oml["load-path"] = oml["load-path"] or {}
for _, d in ipairs(oml["load-path"]) do if d == dir then return end end
table.insert(oml["load-path"], dir)
local pat = dir .. "/?.fnl;" .. dir .. "/?/init.fnl;"
fennel.path = pat .. fennel.path
fennel["macro-path"] = dir .. "/?.fnl;" .. dir .. "/?/init-macros.fnl;" .. dir .. "/?/init.fnl;" .. fennel["macro-path"]
"#;

/// A `package.searchers` entry that finds `.fnl` modules on `oml["load-path"]` and compiles
/// them through the host (and its cache).
const SEARCHER_LUA: &str = r#"
local compile = ...
local function searcher(name)
  local rel = name:gsub("%.", "/")
  for _, dir in ipairs(oml["load-path"] or {}) do
    for _, cand in ipairs({dir .. "/" .. rel .. ".fnl", dir .. "/" .. rel .. "/init.fnl"}) do
      local f = io.open(cand, "r")
      if f then
        f:close()
        local chunk, err = compile(cand)
        if not chunk then error(err, 0) end
        return chunk, cand
      end
    end
  end
  return "\n\tno file on oml's load path for '" .. name .. "'"
end
table.insert(package.searchers, 2, searcher)
"#;
