//! A tool's JSON Schema as the OpenAPI subset Gemini's `parameters` accepts. Pure.
//!
//! Gemini rejects a function declaration whose schema uses a keyword outside its subset, so
//! the schema is converted, never refused: keywords Gemini knows are kept (recursively through
//! `properties`, `items` and `anyOf`), `type: [T, "null"]` becomes `type: T` with
//! `nullable: true`, `const` becomes a one-value `enum`, `oneOf` becomes `anyOf`, an `enum`
//! of anything but strings is left out (Gemini's enums are strings), and every other keyword
//! (`$schema`, `$ref`, `additionalProperties`, `allOf`, `not`, `examples`, …) is dropped. What
//! Gemini requires is filled in: a `type` where none is given (inferred, a string when nothing
//! says otherwise) and an array's `items`. The description says what the model needs; what is
//! dropped only loosens the check.
//!
//! Source: <https://ai.google.dev/api/caching#Schema>.

use serde_json::{Map, Value, json};

/// Keywords kept as they are (their values are not schemas).
const PLAIN: [&str; 16] = [
    "format",
    "title",
    "description",
    "nullable",
    "required",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minProperties",
    "maxProperties",
    "propertyOrdering",
    "default",
];

/// `schema` as Gemini accepts it.
pub fn convert(schema: &Value) -> Value {
    let Value::Object(schema) = schema else {
        return json!({"type": "object"});
    };
    let mut out = Map::new();
    for key in PLAIN {
        if let Some(value) = schema.get(key) {
            out.insert(key.into(), value.clone());
        }
    }
    match schema.get("type") {
        Some(Value::String(kind)) => {
            out.insert("type".into(), json!(kind));
        }
        Some(Value::Array(kinds)) => {
            let real: Vec<&Value> = kinds
                .iter()
                .filter(|k| k.as_str() != Some("null"))
                .collect();
            if let Some(kind) = real.first() {
                out.insert("type".into(), (*kind).clone());
            }
            if real.len() < kinds.len() {
                out.insert("nullable".into(), json!(true));
            }
        }
        _ => {}
    }
    let values = schema
        .get("enum")
        .cloned()
        .or_else(|| schema.get("const").map(|v| json!([v])));
    if let Some(Value::Array(values)) = values
        && values.iter().all(Value::is_string)
    {
        out.insert("enum".into(), Value::Array(values));
    }
    if let Some(Value::Object(properties)) = schema.get("properties") {
        let converted = properties
            .iter()
            .map(|(name, property)| (name.clone(), convert(property)))
            .collect();
        out.insert("properties".into(), Value::Object(converted));
    }
    if let Some(items) = schema.get("items") {
        out.insert("items".into(), convert(items));
    }
    if let Some(Value::Array(any)) = schema.get("anyOf").or_else(|| schema.get("oneOf")) {
        out.insert("anyOf".into(), any.iter().map(convert).collect());
    }
    complete(&mut out);
    Value::Object(out)
}

/// Fill in what Gemini requires and JSON Schema may leave out: a `type` (inferred from the
/// keywords present: `properties` an object, `items` an array, `enum` a string, and a string
/// for a schema that says nothing, Gemini having no "any"), and an array's `items`.
fn complete(out: &mut Map<String, Value>) {
    if !out.contains_key("type") && !out.contains_key("anyOf") {
        let kind = if out.contains_key("properties") {
            "object"
        } else if out.contains_key("items") {
            "array"
        } else {
            "string"
        };
        out.insert("type".into(), json!(kind));
    }
    if out.get("type").and_then(Value::as_str) == Some("array") && !out.contains_key("items") {
        out.insert("items".into(), json!({"type": "string"}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_gemini_rejects_are_converted_or_dropped() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object", "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "description": "a path", "examples": ["a"]},
                "limit": {"type": ["integer", "null"], "minimum": 1},
                "mode": {"const": "fast"},
                "level": {"enum": [1, 2]},
                "tags": {"type": "array", "items": {"type": "string", "$ref": "#/x"}},
                "either": {"oneOf": [{"type": "string"}, {"type": "number"}]}},
            "required": ["path"], "allOf": [{"required": ["limit"]}]});
        assert_eq!(
            convert(&schema),
            json!({"type": "object", "required": ["path"], "properties": {
                "path": {"type": "string", "description": "a path"},
                "limit": {"type": "integer", "nullable": true, "minimum": 1},
                "mode": {"type": "string", "enum": ["fast"]},
                "level": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "either": {"anyOf": [{"type": "string"}, {"type": "number"}]}}})
        );
    }

    #[test]
    fn a_schema_that_is_not_an_object_becomes_an_empty_object_schema() {
        assert_eq!(convert(&json!(true)), json!({"type": "object"}));
    }
}
