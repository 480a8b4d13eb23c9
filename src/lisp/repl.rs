//! The REPL: Fennel's own `fennel.repl` driven from Rust, with oml's macros in scope.
//!
//! A REPL conversation is a coroutine in the shared Lisp state. It asks its frontend for input
//! through `ReadRequest`s and says what each form did, as a typed [`Said`], to a `Sink`: its
//! values, its `print` output, its error with the error's kind, or that it was interrupted, so no
//! front end reads an outcome back out of text. Two front ends
//! use it: the interactive terminal and the socket server (`crate::front::repl`). A running form is interrupted
//! through an `Interrupt` flag checked by the instruction hook; the REPL then reads the next form.
//!
//! This module knows nothing about sockets or about what the forms do.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mlua::{Function, HookTriggers, Table, VmState};
use tokio::sync::{mpsc, oneshot};

use super::error::{Interrupted, classify};
use super::{HOOK_INSTRUCTIONS, Lisp, LispError, Sink};

/// One thing a REPL conversation says, as data: front ends show [`Said::text`] and decide what
/// an outcome means (a failure, a colour) from the variant, never from the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// The values of a form, rendered, tab-separated, ending in a newline.
    Values(String),
    /// A line the form printed with `print` (ending in a newline): output, never an outcome.
    Printed(String),
    /// The form failed: what kind of failure it was, and its message.
    Failed { kind: FormError, message: String },
    /// The form was interrupted (Ctrl-C, or the conversation closed).
    Interrupted,
    /// The prompt before the next input, for a front end that shows it in the output.
    Prompt(&'static str),
}

/// How a form failed, as Fennel's REPL reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormError {
    /// The input does not parse.
    Parse,
    /// Fennel could not compile it.
    Compile,
    /// Lua could not load the compiled code.
    LuaCompile,
    /// It raised an error as it ran.
    Runtime,
    /// A `,` REPL command failed.
    Command,
}

impl FormError {
    /// The kind Fennel's REPL names (`"Parse"`, `"Compile"`, `"Lua Compile"`, `"Runtime"`,
    /// `"Repl"`); an unknown name is a runtime error.
    fn from_fennel(name: &str) -> FormError {
        match name {
            "Parse" => FormError::Parse,
            "Compile" => FormError::Compile,
            "Lua Compile" => FormError::LuaCompile,
            "Repl" => FormError::Command,
            _ => FormError::Runtime,
        }
    }

    /// The word the REPL shows before `error:`.
    pub fn label(self) -> &'static str {
        match self {
            FormError::Parse => "Parse",
            FormError::Compile => "Compile",
            FormError::LuaCompile => "Lua Compile",
            FormError::Runtime => "Runtime",
            FormError::Command => "Repl",
        }
    }
}

impl Said {
    /// What a terminal shows for it.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Said::Values(t) | Said::Printed(t) => t.as_str().into(),
            Said::Failed { kind, message } => format!("{} error: {message}\n", kind.label()).into(),
            Said::Interrupted => "interrupted\n".into(),
            Said::Prompt(p) => (*p).into(),
        }
    }
}

/// A request for the next chunk of input. `continuation` is true inside an unfinished form.
pub struct ReadRequest {
    pub continuation: bool,
    /// `None` ends the conversation.
    pub reply: oneshot::Sender<Option<String>>,
}

/// Interrupts the form a REPL is running. `interrupt` stops the current form only (it is
/// cleared when the next form is read, so a stray Ctrl-C never hits a later form); `close`
/// stops every form from then on (the client is gone). Running Lisp sees it through the
/// instruction hook; a form waiting in an async host function, through [`Interrupt::interrupted`]
/// (see [`super::create_async_function`]).
#[derive(Clone, Debug, Default)]
pub struct Interrupt(Arc<InterruptState>);

#[derive(Debug, Default)]
pub struct InterruptState {
    interrupted: AtomicBool,
    closed: AtomicBool,
    wake: tokio::sync::Notify,
}

impl Interrupt {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn interrupt(&self) {
        self.0.interrupted.store(true, Ordering::SeqCst);
        self.0.wake.notify_waiters();
    }

    pub fn close(&self) {
        self.0.closed.store(true, Ordering::SeqCst);
        self.0.wake.notify_waiters();
    }

    /// Whether the running form must stop now; an interrupt is used up by saying so.
    fn take(&self) -> bool {
        self.0.closed.load(Ordering::SeqCst) || self.0.interrupted.swap(false, Ordering::SeqCst)
    }

    fn clear(&self) {
        self.0.interrupted.store(false, Ordering::SeqCst);
    }

    /// Resolves at the next interrupt (using it up) or once closed.
    pub async fn interrupted(&self) {
        loop {
            let notified = self.0.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.take() {
                return;
            }
            notified.await;
        }
    }
}

/// The prompt shown before a chunk of input.
pub fn prompt(continuation: bool) -> &'static str {
    if continuation { ".. " } else { ">> " }
}

/// Run one REPL conversation until its frontend answers a read with `None`.
pub async fn drive(
    lisp: &Lisp,
    reads: mpsc::UnboundedSender<ReadRequest>,
    out: Sink,
    interrupt: Interrupt,
) -> Result<(), LispError> {
    drive_with(lisp, reads, out, interrupt, |_| {}).await
}

/// [`drive`], calling `setup` with the conversation's coroutine before it starts (the chat maps
/// it to its session).
pub async fn drive_with(
    lisp: &Lisp,
    reads: mpsc::UnboundedSender<ReadRequest>,
    out: Sink,
    interrupt: Interrupt,
    setup: impl FnOnce(&mlua::Thread),
) -> Result<(), LispError> {
    let lua = lisp.lua();
    let driver: Function = lua
        .load(DRIVER)
        .set_name("@src/lisp/prelude/repl.fnl")
        .set_mode(mlua::chunk::ChunkMode::Binary)
        .call(())?;
    let driver = driver.bind(lua.named_registry_value::<Table>(super::SCOPE)?)?;

    let read = read_function(lua, reads, interrupt.clone())?;
    let sink = out.clone();
    let write = lua.create_function(move |_, text: String| {
        let _ = sink.send(Said::Values(text));
        Ok(())
    })?;
    let fail = fail_function(lua, out.clone())?;

    let thread = lua.create_thread(driver)?;
    let hook_flag = interrupt.clone();
    thread.set_hook(
        HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS),
        move |_, _| {
            if hook_flag.take() {
                Err(mlua::Error::external(Interrupted))
            } else {
                Ok(VmState::Continue)
            }
        },
    )?;
    setup(&thread);
    lisp.attach_sink(&thread, out);
    lisp.attach_interrupt(&thread, interrupt);
    let result = thread.clone().into_async::<()>((read, write, fail))?.await;
    lisp.detach_interrupt(&thread);
    lisp.detach_sink(&thread);
    result.map_err(LispError::from)
}

/// The driver's `read`: asks the frontend for a chunk of input (`None` ends the conversation).
fn read_function(
    lua: &mlua::Lua,
    reads: mpsc::UnboundedSender<ReadRequest>,
    interrupt: Interrupt,
) -> mlua::Result<Function> {
    lua.create_async_function(move |_, continuation: bool| {
        let reads = reads.clone();
        let flag = interrupt.clone();
        async move {
            let (reply, answer) = oneshot::channel();
            if reads
                .send(ReadRequest {
                    continuation,
                    reply,
                })
                .is_err()
            {
                return Ok(None);
            }
            let chunk = answer.await.unwrap_or(None);
            // An interrupt that arrived while nobody was evaluating must not hit the next form.
            flag.clear();
            Ok(chunk)
        }
    })
}

/// The driver's `fail`: says a form failed, as [`Said::Interrupted`] when an interrupt stopped
/// it, else as [`Said::Failed`] with the kind Fennel's REPL gave.
fn fail_function(lua: &mlua::Lua, sink: Sink) -> mlua::Result<Function> {
    lua.create_function(
        move |_, (kind, error, text): (String, mlua::Value, String)| {
            let said = match error {
                mlua::Value::Error(e) if matches!(classify(&e, None), LispError::Interrupted) => {
                    Said::Interrupted
                }
                _ => Said::Failed {
                    kind: FormError::from_fennel(&kind),
                    message: text,
                },
            };
            let _ = sink.send(said);
            Ok(())
        },
    )
}

/// Whether `src` holds only complete forms: balanced delimiters outside strings and comments.
/// The interactive frontend keeps reading lines until this is true.
pub fn forms_complete(src: &str) -> bool {
    let mut depth: i64 = 0;
    let mut chars = src.chars();
    while let Some(c) = chars.next() {
        match c {
            ';' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '"' => {
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => {
                            closed = true;
                            break;
                        }
                        _ => {}
                    }
                }
                if !closed {
                    return false;
                }
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
    }
    // Too many closers is a complete (if wrong) input: let Fennel report it.
    depth <= 0
}

/// `prelude/repl.fnl`: a function of the macro scope, `read` and `write` that runs `fennel.repl`.
static DRIVER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude_repl.luac"));

#[cfg(test)]
mod tests {
    use super::forms_complete;

    #[test]
    fn forms_are_complete_when_delimiters_balance_outside_strings_and_comments() {
        let cases = [
            ("(+ 1 2)", true),
            ("(+ 1", false),
            ("(fn f []\n  \"doc (\"\n  1)", true),
            ("\"unterminated", false),
            ("(print \"a \\\" b\")", true),
            ("(foo ; comment with (\n)", true),
            ("{:a [1 2", false),
            ("", true),
            ("))", true),
        ];
        for (src, complete) in cases {
            assert_eq!(forms_complete(src), complete, "{src:?}");
        }
    }
}
