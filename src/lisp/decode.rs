//! JSON text → a Lua value, built while the text is parsed (`json.decode`).
//!
//! Going through a `serde_json::Value` first held every string twice, once in Rust and once in
//! Lua; a tool call's arguments are decoded this way, and a large `write`'s content is as long
//! as the file. Here a string without escapes goes from the text straight into a Lua string,
//! and one with escapes through serde_json's scratch buffer only.
//!
//! The values are the ones `to_lua` gives for the same JSON: integers that fit `i64` as Lua
//! integers (others as floats), `null` as the `json.null` sentinel, arrays as tables marked with
//! mlua's array metatable, objects as plain tables (a repeated key keeps its last value).
//!
//! It knows JSON and Lua values, not what the data means.

use std::fmt;

use mlua::{IntoLua, Lua, LuaSerdeExt, Value};
use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};

use super::convert::LARGE_VALUE_BYTES;

/// The Lua value of the JSON `text`; the error is serde_json's (or the Lua allocation's) message.
///
/// A text longer than [`LARGE_VALUE_BYTES`] first runs a full collection, as `to_lua` does for
/// a value holding that much: what is already garbage goes before the new copy is made.
pub fn decode(lua: &Lua, text: &[u8]) -> Result<Value, serde_json::Error> {
    if text.len() > LARGE_VALUE_BYTES {
        lua.gc_collect().map_err(serde_json::Error::custom)?;
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = LuaSeed(lua).deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Builds one Lua value from whatever the deserializer holds next.
#[derive(Clone, Copy)]
struct LuaSeed<'a>(&'a Lua);

impl<'de> DeserializeSeed<'de> for LuaSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for LuaSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Boolean(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        v.into_lua(self.0).map_err(E::custom)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        v.into_lua(self.0).map_err(E::custom)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        v.into_lua(self.0).map_err(E::custom)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.0
            .create_string(v)
            .map(Value::String)
            .map_err(E::custom)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(self.0.null())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let lua = self.0;
        let table = lua.create_table().map_err(A::Error::custom)?;
        table
            .set_metatable(Some(lua.array_metatable()))
            .map_err(A::Error::custom)?;
        while let Some(item) = seq.next_element_seed(self)? {
            table.raw_push(item).map_err(A::Error::custom)?;
        }
        Ok(Value::Table(table))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let table = self.0.create_table().map_err(A::Error::custom)?;
        while let Some(key) = map.next_key_seed(self)? {
            let value = map.next_value_seed(self)?;
            table.raw_set(key, value).map_err(A::Error::custom)?;
        }
        Ok(Value::Table(table))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same JSON through `serde_json::Value` and `to_lua`, and through `decode`, gives the
    /// same JSON back.
    #[test]
    fn decoding_agrees_with_the_value_route() {
        let lua = Lua::new();
        for text in [
            r#"{"path": "a.txt", "content": "line\none \"quoted\" é \ud83d\ude00"}"#,
            r#"[1, -2, 3.5, 18446744073709551615, true, false, null, [], {}, [[{"k": [null]}]]]"#,
            r#"{"dup": 1, "dup": 2, "empty": "", "n": 1e3}"#,
            r#""just a string""#,
            "12",
        ] {
            let through_value: serde_json::Value = serde_json::from_str(text).unwrap();
            let old = crate::lisp::to_lua(&lua, &through_value).unwrap();
            let new = decode(&lua, text.as_bytes()).unwrap();
            let back = |v: Value| crate::lisp::from_lua(&lua, v).unwrap();
            assert_eq!(back(new.clone()), back(old.clone()), "{text}");
            assert_eq!(new.type_name(), old.type_name(), "{text}");
        }
    }

    #[test]
    fn invalid_json_is_serde_jsons_error() {
        let lua = Lua::new();
        for text in ["{", "[1,]", "{\"a\" 1}", "1 2", "\"\\x\"", ""] {
            let error = decode(&lua, text.as_bytes()).unwrap_err();
            let expected = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
            assert_eq!(error.to_string(), expected.to_string(), "{text}");
        }
    }

    /// Input a model controls (a tool call's arguments): nesting past serde_json's limit, and
    /// bytes that are not UTF-8 inside a string, are errors, not a crash or a lossy string.
    #[test]
    fn hostile_input_is_an_error() {
        let lua = Lua::new();
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let error = decode(&lua, deep.as_bytes()).unwrap_err();
        assert!(error.to_string().contains("recursion limit"), "{error}");
        let error = decode(&lua, b"{\"content\": \"\xff\xfe\"}").unwrap_err();
        assert!(error.to_string().contains("invalid unicode"), "{error}");
    }

    #[test]
    fn arrays_are_marked_and_objects_are_not() {
        let lua = Lua::new();
        let Value::Table(t) = decode(&lua, br#"{"a": [], "o": {}}"#).unwrap() else {
            panic!("a table");
        };
        let a: mlua::Table = t.get("a").unwrap();
        let o: mlua::Table = t.get("o").unwrap();
        assert_eq!(a.metatable(), Some(lua.array_metatable()));
        assert_eq!(o.metatable(), None);
        assert_eq!(t.metatable(), None);
    }
}
