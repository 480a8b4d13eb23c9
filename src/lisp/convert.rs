//! Data crossing between Rust and Lisp: JSON ⇄ Lua, always as a copy.
//!
//! `{}`, `[]` and `null` stay distinct both ways: an empty JSON array becomes a Lua table marked
//! with mlua's array metatable, `null` becomes the `json.null` sentinel (a Lua table cannot hold
//! `nil`), and Lisp code builds arrays with `(json.array ...)`. An empty table built in Lisp
//! without the mark is an object. Functions and other values JSON cannot express are skipped
//! when converting to JSON.
//!
//! This module knows nothing about what the data means.

use mlua::{Lua, LuaSerdeExt, MultiValue, Value};

use super::encode::LuaJson;
use super::surface::{HostFn, define};

/// String bytes in one value above which converting it to or from Lua first runs a full
/// collection.
///
/// Lua's incremental collector runs in steps paced by allocation, so a few large strings made in
/// quick succession (a 20 MB `write`'s arguments: the model's answer, the decoded arguments,
/// the transcript copied for the next request) all stay resident before a cycle completes. A
/// full collection before such a copy frees the copies that are already garbage; the walk that
/// measures the value costs a fraction of the conversion itself, and stops at the limit.
pub const LARGE_VALUE_BYTES: usize = 4 << 20;

/// JSON → a fresh Lua value.
pub fn to_lua(lua: &Lua, json: &serde_json::Value) -> mlua::Result<Value> {
    if string_bytes(json, LARGE_VALUE_BYTES) > LARGE_VALUE_BYTES {
        lua.gc_collect()?;
    }
    lua.to_value(json)
}

/// The bytes of the strings (and keys) in `v`, counted up to a little past `limit`.
pub(super) fn string_bytes(v: &serde_json::Value, limit: usize) -> usize {
    use serde_json::Value as J;
    let mut stack = vec![v];
    let mut total = 0usize;
    while let Some(v) = stack.pop() {
        match v {
            J::String(s) => total += s.len(),
            J::Array(a) => stack.extend(a.iter()),
            J::Object(m) => {
                for (k, v) in m {
                    total += k.len();
                    stack.push(v);
                }
            }
            J::Null | J::Bool(_) | J::Number(_) => {}
        }
        if total > limit {
            break;
        }
    }
    total
}

/// Whether the Lua value `v` holds more than [`LARGE_VALUE_BYTES`] of strings: a value whose
/// every copy counts.
pub fn is_large(v: &Value) -> bool {
    lua_string_bytes(v, LARGE_VALUE_BYTES) > LARGE_VALUE_BYTES
}

/// The bytes of the strings (and string keys) in the Lua value `v`, counted up to a little past
/// `limit`. Each table is visited once, so a table that contains itself ends the walk.
fn lua_string_bytes(v: &Value, limit: usize) -> usize {
    let size = |v: &Value| match v {
        Value::String(s) => s.as_bytes().len(),
        _ => 0,
    };
    let mut seen = std::collections::HashSet::new();
    let mut total = size(v);
    // Only tables wait on the stack; strings are counted as they are met.
    let mut stack: Vec<mlua::Table> = match v {
        Value::Table(t) => vec![t.clone()],
        _ => Vec::new(),
    };
    while let Some(t) = stack.pop() {
        if total > limit {
            break;
        }
        if !seen.insert(t.to_pointer()) {
            continue;
        }
        for (k, v) in t.pairs::<Value, Value>().flatten() {
            total += size(&k) + size(&v);
            if let Value::Table(inner) = v {
                stack.push(inner);
            }
            if total > limit {
                break;
            }
        }
    }
    total
}

/// A Lua value → JSON (a copy). Functions and userdata inside tables are left out.
///
/// Like [`to_lua`], a value of more than [`LARGE_VALUE_BYTES`] of strings first runs a full
/// collection, which frees the large strings already garbage (the decoded arguments of the tool
/// call whose message is being stored) before the copy is made.
pub fn from_lua(lua: &Lua, value: Value) -> mlua::Result<serde_json::Value> {
    if lua_string_bytes(&value, LARGE_VALUE_BYTES) > LARGE_VALUE_BYTES {
        lua.gc_collect()?;
    }
    serde_json::to_value(LuaJson::new(lua, &value)).map_err(mlua::Error::external)
}

/// The `json` namespace's functions.
const JSON: &[HostFn] = &[
    HostFn {
        name: "encode",
        args: "value",
        doc: "VALUE as JSON text. Tables marked by json.array (and decoded arrays) are arrays, \
              other tables objects, json.null is null; functions and userdata are left out. A \
              table that contains itself is an error.",
        make: |lua| {
            lua.create_function(|lua, v: Value| {
                let text = crate::sized::to_vec_exact(&LuaJson::new(lua, &v), 0)
                    .map_err(mlua::Error::external)?;
                lua.create_string(text)
            })
        },
    },
    HostFn {
        name: "encoded-length",
        args: "value",
        doc: "The length in bytes of VALUE as JSON text, as json.encode would write it, \
              counted without making the text (for estimates over large values).",
        make: |lua| {
            lua.create_function(|lua, v: Value| {
                crate::sized::encoded_len(&LuaJson::new(lua, &v)).map_err(mlua::Error::external)
            })
        },
    },
    HostFn {
        name: "decode",
        args: "text",
        doc: "The Lisp value of the JSON TEXT: arrays become tables marked as arrays, null \
              becomes json.null. Invalid JSON is an error starting with \"json.decode: \".",
        make: |lua| {
            lua.create_function(|lua, s: mlua::LuaString| {
                super::decode::decode(lua, &s.as_bytes())
                    .map_err(|e| mlua::Error::RuntimeError(format!("json.decode: {e}")))
            })
        },
    },
    HostFn {
        name: "array",
        args: "...",
        doc: "A new table of the arguments, marked so that it converts to a JSON array even \
              when empty.",
        make: |lua| {
            lua.create_function(|lua, items: MultiValue| {
                let t = lua.create_sequence_from(items)?;
                t.set_metatable(Some(lua.array_metatable()))?;
                Ok(t)
            })
        },
    },
    HostFn {
        name: "object",
        args: "",
        doc: "A new empty table, which converts to a JSON object ({}).",
        make: |lua| lua.create_function(|lua, ()| lua.create_table()),
    },
    HostFn {
        name: "array?",
        args: "value",
        doc: "Whether VALUE is a table marked as a JSON array (by json.array or json.decode).",
        make: |lua| {
            lua.create_function(|lua, v: Value| {
                Ok(match v {
                    Value::Table(t) => t.metatable() == Some(lua.array_metatable()),
                    _ => false,
                })
            })
        },
    },
];

/// The `json` namespace: `encode`, `encoded-length`, `decode`, `null`, `array`, `object`,
/// `array?`.
pub(super) fn install_json(lua: &Lua) -> mlua::Result<()> {
    // mlua protects the array marker with `__metatable = false`, which makes `getmetatable`
    // return `false` and breaks `fennel.view` (the REPL's printer) on every decoded array.
    // Unprotected, it is still recognised by identity.
    lua.array_metatable()
        .raw_set("__metatable", mlua::Value::Nil)?;
    let json = define(lua, "json", JSON)?;
    json.set("null", lua.null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_object_empty_array_and_null_survive_a_round_trip() {
        let lua = Lua::new();
        install_json(&lua).unwrap();
        let cases = [
            json!({"obj": {}, "arr": [], "nul": null}),
            json!([]),
            json!({}),
            json!([1, "two", null, {"three": [3]}]),
            json!({"nested": {"deep": [[], {}]}}),
            json!(-0.5),
        ];
        for case in cases {
            let v = to_lua(&lua, &case).unwrap();
            assert_eq!(from_lua(&lua, v).unwrap(), case);
        }
    }

    #[test]
    fn lisp_built_arrays_and_objects_keep_their_kind() {
        let lua = Lua::new();
        install_json(&lua).unwrap();
        let v: Value = lua
            .load("return {a = json.array(), o = json.object(), n = json.null, s = {1, 2}}")
            .eval()
            .unwrap();
        assert_eq!(
            from_lua(&lua, v).unwrap(),
            serde_json::json!({"a": [], "o": {}, "n": null, "s": [1, 2]})
        );
    }

    #[test]
    fn functions_inside_tables_are_left_out() {
        let lua = Lua::new();
        let v: Value = lua.load("return {a = 1, f = print}").eval().unwrap();
        assert_eq!(from_lua(&lua, v).unwrap(), serde_json::json!({"a": 1}));
    }
}
