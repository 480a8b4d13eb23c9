//! Rust-defined Lisp functions, documented like Fennel ones.
//!
//! A namespace's host functions are a table of [`HostFn`] rows (name, argument list, docstring,
//! constructor); [`define`] creates each function and stores it in the namespace table with the
//! Fennel metadata `fnl/docstring` and `fnl/arglist`, so `(doc client.connect)`, `describe` and
//! `apropos` show it exactly as they show a Fennel `fn` with a docstring.
//!
//! This module knows nothing about what the functions do; the modules that own them write the
//! rows.

use mlua::{Function, Lua, Table, Value};

/// One Rust-defined function of a namespace.
pub struct HostFn {
    /// The key in the namespace table (`"connect"` for `client.connect`).
    pub name: &'static str,
    /// The argument names, separated by spaces, as Fennel writes them (`"command ?args ?opts"`).
    pub args: &'static str,
    /// What the function takes, returns and raises.
    pub doc: &'static str,
    /// Creates the function. Host functions find their state in the Lua state's app data, so a
    /// constructor captures nothing and the rows can be constant tables.
    pub make: fn(&Lua) -> mlua::Result<Function>,
}

/// The global table `namespace`, created when it does not exist yet.
pub fn namespace(lua: &Lua, namespace: &str) -> mlua::Result<Table> {
    match lua.globals().raw_get::<Value>(namespace)? {
        Value::Table(t) => Ok(t),
        _ => {
            let t = lua.create_table()?;
            lua.globals().raw_set(namespace, &t)?;
            Ok(t)
        }
    }
}

/// Create every function of `fns` and store it, documented, in the global table `namespace`
/// (created when missing). Returns the namespace table.
pub fn define(lua: &Lua, namespace_name: &str, fns: &[HostFn]) -> mlua::Result<Table> {
    let ns = namespace(lua, namespace_name)?;
    fill(lua, &ns, fns)?;
    Ok(ns)
}

/// Create every function of `fns` and store it, documented, in `table`.
pub fn fill(lua: &Lua, table: &Table, fns: &[HostFn]) -> mlua::Result<()> {
    for row in fns {
        let f = (row.make)(lua)?;
        document(lua, &f, row.args, row.doc)?;
        table.raw_set(row.name, f)?;
    }
    Ok(())
}

/// Give `f` the Fennel metadata of a `fn` with the argument list `args` (names separated by
/// spaces) and the docstring `doc`, and the mark `oml/host` (defined in Rust). Does nothing in a state without Fennel (a bare `Lua` in a
/// unit test).
pub fn document(lua: &Lua, f: &Function, args: &str, doc: &str) -> mlua::Result<()> {
    let Value::Table(fennel) = lua.globals().raw_get("fennel")? else {
        return Ok(());
    };
    let metadata: Table = fennel.get("metadata")?;
    let meta = lua.create_table_with_capacity(0, 3)?;
    meta.raw_set("fnl/docstring", doc)?;
    // Read by `oml.where`: no Fennel source to point at, even through a wrapper.
    meta.raw_set("oml/host", true)?;
    meta.raw_set(
        "fnl/arglist",
        lua.create_sequence_from(args.split_whitespace())?,
    )?;
    metadata.raw_set(f, meta)
}
