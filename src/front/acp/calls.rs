//! Calls from the ACP layer into Lisp: user-defined methods (`acp.methods`) and named functions
//! whose JSON answer is sent on.
//!
//! Every name is looked up at call time, so a redefinition takes effect at the next call. It
//! knows nothing of which ACP method is being served.

use serde_json::Value;

use super::ctx::Ctx;
use super::hub::stable_order;
use crate::jsonrpc::{self, RpcError};
use crate::lisp::{Lisp, LispError, from_lua, to_lua};

/// Whether `acp.methods` (looked up now) has a function for `method`.
pub(super) fn has_user_method(lisp: &Lisp, method: &str) -> bool {
    let Ok(mlua::Value::Table(methods)) = lisp.lookup("acp.methods") else {
        return false;
    };
    match methods.raw_get::<mlua::Value>(method) {
        Ok(mlua::Value::Function(_)) => true,
        Ok(mlua::Value::Table(t)) => t.metatable().is_some(),
        _ => false,
    }
}

/// Call `acp.methods[method]` with the params (looked up now); its value is the result.
pub(super) async fn call_user_method(
    ctx: &Ctx,
    method: &str,
    params: Value,
) -> Result<Value, RpcError> {
    let lua = ctx.lisp.lua();
    let run = async {
        let methods: mlua::Table = match ctx.lisp.lookup("acp.methods")? {
            mlua::Value::Table(t) => t,
            _ => return Err(LispError::Runtime("acp.methods is not a table".into())),
        };
        let f: mlua::Function = match methods.raw_get::<mlua::Value>(method)? {
            mlua::Value::Function(f) => f,
            mlua::Value::Table(t) => {
                let call: mlua::Function = t
                    .metatable()
                    .ok_or_else(|| LispError::Runtime(format!("{method} is not a function")))?
                    .get("__call")?;
                call.bind(t)?
            }
            _ => return Err(LispError::Runtime(format!("{method} is not a function"))),
        };
        let arg = to_lua(lua, &params)?;
        let v: mlua::Value = ctx.lisp.run(f, arg, &ctx.shutdown.child()).await?;
        Ok(from_lua(lua, v)?)
    };
    match run.await {
        Ok(Value::Null) => Ok(crate::acp::rpc::empty_result()),
        Ok(v) => Ok(v),
        Err(e) => Err(RpcError::new(jsonrpc::INTERNAL_ERROR, e.to_string())),
    }
}

/// Call the Lisp function `name` with JSON arguments.
pub(super) async fn lisp_json(
    ctx: &Ctx,
    name: &str,
    args: &[Value],
) -> Result<Value, crate::lisp::LispError> {
    ctx.lisp
        .call_json(name, args, &ctx.shutdown.child())
        .await
        .map(|v| stable_order(v, "id"))
}
