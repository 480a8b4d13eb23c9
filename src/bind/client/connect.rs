//! `client.connect`: its options read into the transport's (`ConnectOptions`: the command or
//! URL, environment, timeouts, handlers), the connection made, and its out-of-turn updates
//! handed to the program's callback. It knows the options, not the protocol.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use mlua::{Function, Table, Value};
use parking_lot::Mutex;

use super::permission::{self, ASK_ON_TERMINAL, terminal_permission_handler};
use super::turns::deliver_out_of_turn;
use super::{Conn, ConnState, lua_error, remote};
use crate::acp_client::{Client, ClientError, ConnectOptions, Spawn};
use crate::lisp::Lisp;

pub(super) fn seconds(t: &Table, key: &str) -> Result<Option<Duration>, ClientError> {
    let v: Option<f64> = t.get(key).map_err(lua_error)?;
    Ok(v.filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64))
}

pub(super) async fn connect(
    lisp: &Lisp,
    command: String,
    args: Option<Table>,
    opts: Option<Table>,
) -> Result<Conn, ClientError> {
    let lua = lisp.lua();
    let args: Vec<String> = match args {
        Some(t) => t
            .sequence_values::<String>()
            .collect::<mlua::Result<_>>()
            .map_err(lua_error)?,
        None => Vec::new(),
    };
    let remote = remote::remote_of(&command, opts.as_ref())?;
    let mut options = ConnectOptions {
        spawn: Spawn {
            command,
            args,
            ..Spawn::default()
        },
        auto_authenticate: true,
        remote,
        offer_v2: lisp
            .setting::<Vec<u64>>("acp.protocol-versions")
            .is_ok_and(|v| v.contains(&2)),
        ..ConnectOptions::default()
    };
    let mut on_update = None;
    if let Some(opts) = &opts {
        read_options(lisp, opts, &mut options)?;
    }
    if options.on_permission.is_none() && ASK_ON_TERMINAL.load(Ordering::SeqCst) {
        options.on_permission = Some(terminal_permission_handler());
    }
    if let Some(opts) = &opts
        && let Some(f) = opts
            .get::<Option<Function>>("on-update")
            .map_err(lua_error)?
    {
        on_update = Some(lua.create_registry_value(f).map_err(lua_error)?);
    }
    let client = Client::connect(options).await?;
    let conn = Conn {
        client: client.clone(),
        state: Arc::new(ConnState {
            on_update,
            last_turns: Mutex::new(HashMap::new()),
        }),
    };
    deliver_out_of_turn_updates(lisp, &client, &conn);
    Ok(conn)
}

/// The table's `:env`, `:cwd`, timeouts, `:authenticate?` and permission handlers, into
/// `options`.
fn read_options(
    lisp: &Lisp,
    opts: &Table,
    options: &mut ConnectOptions,
) -> Result<(), ClientError> {
    if let Some(env) = opts.get::<Option<Table>>("env").map_err(lua_error)? {
        for pair in env.pairs::<String, String>() {
            options.spawn.env.push(pair.map_err(lua_error)?);
        }
    }
    options.spawn.cwd = opts
        .get::<Option<String>>("cwd")
        .map_err(lua_error)?
        .map(PathBuf::from);
    options.request_timeout = seconds(opts, "request-timeout")?;
    options.startup_timeout = seconds(opts, "startup-timeout")?;
    options.auto_authenticate = !matches!(
        opts.get::<Value>("authenticate?").map_err(lua_error)?,
        Value::Boolean(false)
    );
    permission::handlers(lisp, opts, options)
}

/// Hand the updates that come between turns to `conn`'s `:on-update`, in a task of its own.
fn deliver_out_of_turn_updates(lisp: &Lisp, client: &Client, conn: &Conn) {
    if let Some(mut rx) = client.take_out_of_turn() {
        let lisp = lisp.clone();
        let state = Arc::clone(&conn.state);
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                if let Err(e) = deliver_out_of_turn(&lisp, &state, event).await {
                    tracing::warn!("an out-of-turn update callback failed: {e}");
                }
            }
        });
    }
}
