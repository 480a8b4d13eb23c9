//! Stored JSON objects shown to Lisp lazily: a table whose fields are copied out of the stored
//! value only when Lisp reads them. The transcript hands its large messages to Lisp this way, so
//! that the request built from them is written from the stored messages (`crate::lisp::encode`
//! knows such tables) and a message holding a whole file is not copied into Lua to be sent.
//!
//! A stored table is a table for all that Lisp does with one by name: `.` and `tset` (a field
//! read is copied in once, a field set replaces the stored one), `pairs` (which copies every
//! field in first), `#`, `json.encode`. Only the raw functions (`rawget`, `next` outside `pairs`)
//! see just the fields read or set so far.
//!
//! It knows nothing of what the objects mean.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use mlua::{AnyUserData, Function, Lua, LuaSerdeExt, MultiValue, Table, UserData, Value};
use serde_json::Value as Json;

use super::convert::{LARGE_VALUE_BYTES, string_bytes, to_lua};

/// The string bytes above which a stored object is shown lazily; smaller ones are copied whole,
/// as plain tables.
pub const LAZY_OBJECT_BYTES: usize = 64 << 10;

/// The metatable key of a stored table's [`Stored`].
const STORED: &str = "__oml_stored";

/// The registry key of the metamethods every stored table shares.
const METAMETHODS: &str = "oml.stored-metamethods";

/// What a stored table stands for: the object, and the keys Lisp has read or set (those are the
/// table's own now, present or removed).
struct Stored {
    value: Arc<Json>,
    taken: Mutex<HashSet<String>>,
}

impl UserData for Stored {}

/// A stored object as the table's fields not yet taken: the object and the keys to read from it.
pub struct Untaken {
    pub value: Arc<Json>,
    pub keys: Vec<String>,
}

impl Untaken {
    /// The stored value of `key`.
    pub fn get(&self, key: &str) -> &Json {
        self.value.get(key).unwrap_or(&Json::Null)
    }
}

/// `value` for Lisp: a stored table when it is an object of more than [`LAZY_OBJECT_BYTES`] of
/// strings, else a plain copy ([`to_lua`]).
pub fn to_lua_stored(lua: &Lua, value: &Arc<Json>) -> mlua::Result<Value> {
    if !value.is_object() || string_bytes(value, LAZY_OBJECT_BYTES) <= LAZY_OBJECT_BYTES {
        return to_lua(lua, value);
    }
    let shared = metamethods(lua)?;
    let meta = lua.create_table_with_capacity(0, 4)?;
    for name in ["__index", "__newindex", "__pairs"] {
        meta.raw_set(name, shared.raw_get::<Function>(name)?)?;
    }
    let stored = Stored {
        value: Arc::clone(value),
        taken: Mutex::new(HashSet::new()),
    };
    meta.raw_set(STORED, lua.create_userdata(stored)?)?;
    let table = lua.create_table()?;
    table.set_metatable(Some(meta))?;
    Ok(Value::Table(table))
}

/// The stored objects `items` for Lisp: a fresh list (marked as an array) of them, each by
/// [`to_lua_stored`]. A list of more than
/// [`LARGE_VALUE_BYTES`] of strings first runs a full collection: the copies a large value left
/// behind in earlier steps (a `write`'s arguments, decoded) are freed before the request that
/// follows is written.
pub fn to_lua_stored_list(lua: &Lua, items: &[Arc<Json>]) -> mlua::Result<Table> {
    let mut total = 0usize;
    for item in items {
        total += string_bytes(item, LARGE_VALUE_BYTES - total.min(LARGE_VALUE_BYTES));
        if total > LARGE_VALUE_BYTES {
            lua.gc_collect()?;
            break;
        }
    }
    let list = lua.create_table_with_capacity(items.len(), 0)?;
    list.set_metatable(Some(lua.array_metatable()))?;
    for item in items {
        list.raw_push(to_lua_stored(lua, item)?)?;
    }
    Ok(list)
}

/// The fields of the stored table `t` not taken yet, `None` when `t` is no stored table.
pub fn untaken(t: &Table) -> Option<Untaken> {
    let stored = stored_of(t)?;
    let stored = stored.borrow::<Stored>().ok()?;
    let taken = stored.taken.lock().unwrap_or_else(PoisonError::into_inner);
    let keys = match &*stored.value {
        Json::Object(map) => map
            .keys()
            .filter(|k| !taken.contains(*k))
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    Some(Untaken {
        value: Arc::clone(&stored.value),
        keys,
    })
}

// --- private: the metamethods

fn stored_of(t: &Table) -> Option<AnyUserData> {
    t.metatable()?.raw_get::<AnyUserData>(STORED).ok()
}

/// The shared `__index`, `__newindex` and `__pairs`, made once per state.
fn metamethods(lua: &Lua) -> mlua::Result<Table> {
    if let Ok(t) = lua.named_registry_value::<Table>(METAMETHODS) {
        return Ok(t);
    }
    let t = lua.create_table()?;
    t.raw_set("__index", lua.create_function(index)?)?;
    t.raw_set(
        "__newindex",
        lua.create_function(|_, (t, k, v): (Table, Value, Value)| {
            if let (Value::String(key), Some(stored)) = (&k, stored_of(&t)) {
                let stored = stored.borrow::<Stored>()?;
                stored
                    .taken
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(key.to_str()?.to_string());
            }
            t.raw_set(k, v)
        })?,
    )?;
    let next: Function = lua.globals().raw_get("next")?;
    t.raw_set(
        "__pairs",
        lua.create_function(move |lua, t: Table| {
            if let Some(fields) = untaken(&t) {
                for key in &fields.keys {
                    take(lua, &t, key, fields.get(key))?;
                }
            }
            Ok(MultiValue::from_vec(vec![
                Value::Function(next.clone()),
                Value::Table(t),
                Value::Nil,
            ]))
        })?,
    )?;
    lua.set_named_registry_value(METAMETHODS, &t)?;
    Ok(t)
}

/// `__index`: a field not taken yet is copied in from the stored object, once.
fn index(lua: &Lua, (t, k): (Table, Value)) -> mlua::Result<Value> {
    let Value::String(key) = k else {
        return Ok(Value::Nil);
    };
    let key = key.to_str()?;
    let Some(stored) = stored_of(&t) else {
        return Ok(Value::Nil);
    };
    let value = {
        let stored = stored.borrow::<Stored>()?;
        let taken = stored.taken.lock().unwrap_or_else(PoisonError::into_inner);
        match stored.value.get(&*key) {
            Some(_) if taken.contains(&*key) => return Ok(Value::Nil),
            Some(_) => Arc::clone(&stored.value),
            None => return Ok(Value::Nil),
        }
    };
    take(lua, &t, &key, &value[&*key])
}

/// Copy the stored `value` of `key` into `t` and mark the key taken.
fn take(lua: &Lua, t: &Table, key: &str, value: &Json) -> mlua::Result<Value> {
    let v = to_lua(lua, value)?;
    t.raw_set(key, v.clone())?;
    if let Some(stored) = stored_of(t) {
        stored
            .borrow::<Stored>()?
            .taken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.to_owned());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lisp::encode::LuaJson;
    use serde_json::json;

    /// An assistant message whose call's arguments make it lazy.
    fn message() -> Arc<Json> {
        let arguments = "y".repeat(LAZY_OBJECT_BYTES + 1);
        Arc::new(json!({
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "write", "arguments": arguments}}]
        }))
    }

    /// What Lisp does to a stored message (Lua source given the message as `m`), and the
    /// message as JSON afterwards, changed as a plain table's copy would be.
    type Change = fn(&mut Json);

    const CASES: &[(&str, Change)] = &[
        ("return m", |_| {}),
        ("local _ = m.role; return m", |_| {}),
        ("m.content = 'said'; return m", |m| {
            m["content"] = json!("said")
        }),
        ("m.tool_calls = nil; return m", |m| {
            m.as_object_mut().expect("an object").remove("tool_calls");
        }),
        ("m.extra = 1; return m", |m| m["extra"] = json!(1)),
        ("for k, v in pairs(m) do end; return m", |_| {}),
        (
            "local calls = m.tool_calls; calls[1].id = 'c2'; return m",
            |m| m["tool_calls"][0]["id"] = json!("c2"),
        ),
        ("local _ = m.role; m.role = nil; return m", |m| {
            m.as_object_mut().expect("an object").remove("role");
        }),
    ];

    #[test]
    fn a_stored_table_writes_as_its_plain_copy_would() {
        let lua = Lua::new();
        for (source, change) in CASES {
            let stored = message();
            let m = to_lua_stored(&lua, &stored).expect("a stored table");
            lua.globals().set("m", m).expect("set");
            let out: Value = lua.load(*source).eval().expect(source);
            let mut expected = (*stored).clone();
            change(&mut expected);
            let written = serde_json::to_value(LuaJson::new(&lua, &out)).expect(source);
            assert!(written == expected, "{source}");
            let converted = crate::lisp::from_lua(&lua, out).expect(source);
            assert!(converted == expected, "{source}: from_lua");
        }
    }

    #[test]
    fn lisp_reads_a_stored_table_as_a_table() {
        let lua = Lua::new();
        let m = to_lua_stored(&lua, &message()).expect("a stored table");
        lua.globals().set("m", m).expect("set");
        let (kind, role, name, keys, len): (String, String, String, i64, i64) = lua
            .load(
                "local n = 0; for _ in pairs(m) do n = n + 1 end
                 return type(m), m.role, m.tool_calls[1]['function'].name, n, #m",
            )
            .eval()
            .expect("reads");
        assert_eq!(
            (kind.as_str(), role.as_str(), name.as_str(), keys, len),
            ("table", "assistant", "write", 3, 0)
        );
        // Read once: the field is the table's own from then on.
        let same: bool = lua
            .load("return m.tool_calls == m.tool_calls and rawget(m, 'tool_calls') ~= nil")
            .eval()
            .expect("reads");
        assert!(same);
    }

    #[test]
    fn small_objects_and_other_values_are_plain_copies() {
        let lua = Lua::new();
        for value in [
            json!({"role": "user", "content": "hi"}),
            json!("x".repeat(1 << 17)),
        ] {
            let v = to_lua_stored(&lua, &Arc::new(value)).expect("a value");
            if let Value::Table(t) = &v {
                assert!(t.metatable().is_none(), "a plain table");
            }
            assert!(untaken_of(&v).is_none());
        }
    }

    fn untaken_of(v: &Value) -> Option<Untaken> {
        match v {
            Value::Table(t) => untaken(t),
            _ => None,
        }
    }
}
