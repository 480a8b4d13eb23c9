//! Running Lisp: each evaluation in a coroutine of its own, so that async host functions can
//! suspend it, with an instruction hook that stops it when its cancel token fires.
//!
//! This module does not know what the code does or who waits for it.

use std::future::Future;

use mlua::{FromLuaMulti, Function, HookTriggers, IntoLuaMulti, Lua, VmState};

use super::error::Interrupted;
use super::{Lisp, LispError};
use crate::cancel::CancelToken;

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
        let interrupt =
            Lisp::from_lua(&lua).and_then(|lisp| lisp.interrupt_of(&lua.current_thread()));
        let fut = func(lua, args);
        async move {
            match interrupt {
                None => fut.await,
                Some(interrupt) => tokio::select! {
                    r = fut => r,
                    () = interrupt.interrupted() => Err(mlua::Error::external(Interrupted)),
                },
            }
        }
    })
}

/// How many VM instructions run between two checks of the interrupt flag. Small enough that an
/// interrupt lands within microseconds, large enough that the check costs nothing measurable.
pub const HOOK_INSTRUCTIONS: u32 = 1000;

impl Lisp {
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
            r = fut => r.map_err(LispError::from),
            _ = cancel.cancelled() => Err(LispError::Interrupted),
        }
    }
}
