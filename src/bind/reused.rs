//! One Lua table per reading: a host function that hands Lisp a table made of something it
//! read and keeps for a while (the skills and commands found, the settings files' rules and
//! hooks) gives the same table while that reading is the same, so nothing is converted again
//! at every call. Each reading has a number; a new reading gets a new number and so a new
//! table. It knows nothing of what the readings are.

use mlua::{Lua, Table};

/// The Lua registry's table of the tables made: slot → table, and `slot\0n` → its reading's
/// number.
const TABLES: &str = "oml.reused-tables";

/// The table of `slot` for reading number `n`: the one made last while `n` is the same, else
/// the one `make` makes now, kept for the next call. Callers treat it as read-only.
pub(crate) fn reused_table(
    lua: &Lua,
    slot: &str,
    n: u64,
    make: impl FnOnce() -> mlua::Result<Table>,
) -> mlua::Result<Table> {
    let tables: Table = match lua.named_registry_value::<Option<Table>>(TABLES)? {
        Some(t) => t,
        None => {
            let t = lua.create_table()?;
            lua.set_named_registry_value(TABLES, t.clone())?;
            t
        }
    };
    let number = format!("{slot}\0n");
    if tables.raw_get::<Option<u64>>(number.as_str())? == Some(n)
        && let Some(t) = tables.raw_get::<Option<Table>>(slot)?
    {
        return Ok(t);
    }
    let t = make()?;
    tables.raw_set(slot, t.clone())?;
    tables.raw_set(number, n)?;
    Ok(t)
}
