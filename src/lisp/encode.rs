//! Lua values written as JSON text directly, by the rules of the conversion to JSON values
//! (`convert::from_lua`), with no JSON value in between: `json.encode`, `json.encoded-length`
//! and the `llm.chat` request body, where a value can hold a whole file.
//!
//! The rules, the same both ways:
//! - a table marked by `json.array`, or with a sequence part (`#t > 0`), is an array of its
//!   first `#t` values; any other table is an object;
//! - `nil` and `json.null` are `null`; functions, coroutines and userdata are left out of
//!   tables (and are `null` alone); a key that is `json.null` or such a value is left out too;
//! - object keys must be strings, and strings valid UTF-8: anything else is an error, as is a
//!   table that contains itself or nests deeper than [`MAX_DEPTH`].
//!
//! It knows nothing of what the values mean.

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::Arc;

use mlua::{Lua, LuaSerdeExt, Table, Value};
use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value as Json;

/// The deepest nesting of tables a value may have (mlua's limit for the conversion too).
pub const MAX_DEPTH: usize = 128;

/// A Lua value that serializes as JSON by the rules above.
pub struct LuaJson<'a> {
    lua: &'a Lua,
    value: &'a Value,
    sorted: bool,
}

impl<'a> LuaJson<'a> {
    /// `value`, its objects' keys in `pairs` order.
    pub fn new(lua: &'a Lua, value: &'a Value) -> Self {
        Self {
            lua,
            value,
            sorted: false,
        }
    }

    /// `value`, its objects' keys sorted: the same text from run to run (Lua's `pairs` order
    /// depends on a per-state hash seed), for messages a peer or a snapshot reads.
    pub fn sorted(lua: &'a Lua, value: &'a Value) -> Self {
        Self {
            lua,
            value,
            sorted: true,
        }
    }
}

impl Serialize for LuaJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let path = RefCell::new(Vec::new());
        Nested {
            lua: self.lua,
            value: self.value,
            path: &path,
            sorted: self.sorted,
        }
        .serialize(serializer)
    }
}

/// Whether a table entry's key or value is one the rules leave out.
pub fn skipped(value: &Value) -> bool {
    match value {
        Value::LightUserData(u) => !u.0.is_null(),
        Value::UserData(_)
        | Value::Function(_)
        | Value::Thread(_)
        | Value::Error(_)
        | Value::Other(_) => true,
        Value::Nil
        | Value::Boolean(_)
        | Value::Integer(_)
        | Value::Number(_)
        | Value::String(_)
        | Value::Table(_) => false,
    }
}

/// How many values the table `t` has as an array, or `None` when it is an object.
pub fn array_len(lua: &Lua, t: &Table) -> Option<usize> {
    let len = t.raw_len();
    (len > 0 || t.metatable() == Some(lua.array_metatable())).then_some(len)
}

/// The value of one field of an object.
pub enum Field {
    /// A Lua value.
    Lua(Value),
    /// A field of a stored table not read yet: the stored object and the key
    /// (`crate::lisp::stored`).
    Stored(Arc<Json>, String),
}

impl Field {
    /// The field's value as JSON, a copy.
    pub fn to_json(&self, lua: &Lua) -> mlua::Result<Json> {
        match self {
            Field::Lua(v) => super::convert::from_lua(lua, v.clone()),
            Field::Stored(object, key) => Ok(object.get(key).cloned().unwrap_or(Json::Null)),
        }
    }
}

/// The entries of `t` as an object has them: string keys, in `pairs` order (then a stored
/// table's fields not read yet), without the keys and values the rules leave out; a key of
/// another kind is an error.
pub fn object_entries(t: &Table) -> mlua::Result<Vec<(String, Field)>> {
    let mut entries = Vec::new();
    for pair in t.pairs::<Value, Value>() {
        let (key, value) = pair?;
        if key.is_null() || skipped(&key) || skipped(&value) {
            continue;
        }
        let key = match key {
            Value::String(s) => s.to_str()?.to_string(),
            other => {
                let shown = match other {
                    Value::Integer(i) => format!(" {i}"),
                    Value::Number(n) => format!(" {n}"),
                    Value::Boolean(b) => format!(" {b}"),
                    _ => String::new(),
                };
                return Err(mlua::Error::runtime(format!(
                    "a key of a JSON object must be a string, got {}{shown}",
                    other.type_name()
                )));
            }
        };
        entries.push((key, Field::Lua(value)));
    }
    if let Some(untaken) = super::stored::untaken(t) {
        for key in untaken.keys {
            entries.push((key.clone(), Field::Stored(Arc::clone(&untaken.value), key)));
        }
    }
    Ok(entries)
}

/// `write` run with the table `t` on `path`, the tables being written: a table already on it
/// (one that contains itself) or a path of [`MAX_DEPTH`] tables is an error instead.
pub fn on_path<T, E: serde::ser::Error>(
    path: &RefCell<Vec<*const c_void>>,
    t: &Table,
    write: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let ptr = t.to_pointer();
    if path.borrow().contains(&ptr) {
        return Err(E::custom("recursive table detected"));
    }
    if path.borrow().len() >= MAX_DEPTH {
        return Err(E::custom(format!("tables nest deeper than {MAX_DEPTH}")));
    }
    path.borrow_mut().push(ptr);
    let result = write();
    path.borrow_mut().pop();
    result
}

/// A value inside a top-level one, with the tables above it.
pub struct Nested<'a> {
    pub lua: &'a Lua,
    pub value: &'a Value,
    pub path: &'a RefCell<Vec<*const c_void>>,
    /// Objects' keys sorted instead of in `pairs` order.
    pub sorted: bool,
}

impl Serialize for Nested<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.value {
            Value::Nil => serializer.serialize_unit(),
            Value::Boolean(b) => serializer.serialize_bool(*b),
            Value::Integer(i) => serializer.serialize_i64(*i),
            Value::Number(n) => serializer.serialize_f64(*n),
            Value::String(s) => match s.to_str() {
                Ok(s) => serializer.serialize_str(&s),
                Err(_) => Err(S::Error::custom("a string is not valid UTF-8, so not JSON")),
            },
            Value::Table(t) => self.table(t, serializer),
            Value::LightUserData(_)
            | Value::UserData(_)
            | Value::Function(_)
            | Value::Thread(_)
            | Value::Error(_)
            | Value::Other(_) => serializer.serialize_unit(),
        }
    }
}

impl Nested<'_> {
    /// The table `t`, as an array or an object, once on the path.
    fn table<S: Serializer>(&self, t: &Table, serializer: S) -> Result<S::Ok, S::Error> {
        on_path(self.path, t, || self.contents(t, serializer))
    }

    fn contents<S: Serializer>(&self, t: &Table, serializer: S) -> Result<S::Ok, S::Error> {
        if let Some(len) = array_len(self.lua, t) {
            let mut seq = serializer.serialize_seq(Some(len))?;
            for i in 1..=len {
                let value: Value = t.raw_get(i).map_err(S::Error::custom)?;
                if !skipped(&value) {
                    seq.serialize_element(&self.inner(&value))?;
                }
            }
            return seq.end();
        }
        let mut entries = object_entries(t).map_err(S::Error::custom)?;
        if self.sorted {
            entries.sort_by(|(a, _), (b, _)| a.cmp(b));
        }
        let mut map = serializer.serialize_map(Some(entries.len()))?;
        for (key, value) in &entries {
            match value {
                Field::Lua(value) => map.serialize_entry(key, &self.inner(value))?,
                Field::Stored(object, field) => {
                    map.serialize_entry(key, &object[field.as_str()])?
                }
            }
        }
        map.end()
    }

    /// `value`, inside this one.
    fn inner<'v>(&'v self, value: &'v Value) -> Nested<'v> {
        Nested {
            lua: self.lua,
            value,
            path: self.path,
            sorted: self.sorted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain Lua values (`null` is json.null, `array_mt` the array mark, `f` a function).
    const VALUES: &[&str] = &[
        "nil",
        "true",
        "-3",
        "2.5",
        "'é\\n\"'",
        "{}",
        "setmetatable({}, array_mt)",
        "{1, 'two', null, {three = {3}}}",
        "{a = {}, b = setmetatable({}, array_mt), c = null, d = f}",
        "{[null] = 1, [f] = 2, x = 3}",
        "{1, f, 3}",
        "{1, 2, x = 'dropped: the table is an array'}",
        "{[2] = 'x'}",
        "{[true] = 1}",
        "{[1.5] = 1}",
        "'\\255'",
        "{k = '\\255'}",
        "(function() local t = {}; t.t = t; return t end)()",
        "(function() local t = {}; for _ = 1, 200 do t = {t} end; return t end)()",
    ];

    /// Every value encodes as mlua's conversion to JSON does (what `convert::from_lua` used
    /// before it wrote through these rules too), and fails where it fails.
    #[test]
    fn encoding_follows_the_conversion_to_json() {
        let lua = Lua::new();
        let g = lua.globals();
        g.set("null", lua.null()).unwrap();
        g.set("array_mt", lua.array_metatable()).unwrap();
        g.set("f", lua.create_function(|_, ()| Ok(())).unwrap())
            .unwrap();
        for source in VALUES {
            let value: Value = lua.load(format!("return {source}")).eval().unwrap();
            let direct = serde_json::to_string(&LuaJson::new(&lua, &value));
            let options = mlua::serde::DeserializeOptions::new()
                .deny_unsupported_types(false)
                .deny_recursive_tables(true);
            let converted = lua
                .from_value_with::<serde_json::Value>(value.clone(), options)
                .map(|j| j.to_string());
            match (direct, converted) {
                (Ok(direct), Ok(converted)) => assert_eq!(direct, converted, "{source}"),
                (Err(_), Err(_)) => {}
                (direct, converted) => panic!("{source}: {direct:?} against {converted:?}"),
            }
        }
    }
}
