//! Settings from Rust: declaring them in the registry `defsetting` writes (core.fnl), reading
//! them typed, and setting them with the same validation as `setq`.
//!
//! This module does not know any particular setting.

use mlua::{Function, Table, Value};

use super::{Lisp, LispError, from_lua, to_lua};

/// A setting declared by a Rust module.
pub struct SettingDecl {
    pub name: &'static str,
    pub doc: &'static str,
    /// A type name (`"integer"`, `"string?"`, ...) or an array of allowed values.
    pub ty: serde_json::Value,
    /// The initial value; `null` means nil.
    pub default: serde_json::Value,
    pub secret: bool,
    pub file: &'static str,
    pub line: u32,
}

impl SettingDecl {
    /// The setting `name` of type `ty` (a type name such as `"integer"` or `"string?"`, or a
    /// JSON array of the values allowed), starting at `default` (`null`: nil), documented by
    /// `doc`, declared where this is called. The one way Rust declares a setting.
    #[track_caller]
    pub fn new(
        name: &'static str,
        ty: impl Into<serde_json::Value>,
        default: impl Into<serde_json::Value>,
        doc: &'static str,
    ) -> SettingDecl {
        let at = std::panic::Location::caller();
        SettingDecl {
            name,
            doc,
            ty: ty.into(),
            default: default.into(),
            secret: false,
            file: at.file(),
            line: at.line(),
        }
    }

    /// This setting, secret: `/settings` and `oml.settings` never show its value.
    pub fn secret(self) -> SettingDecl {
        SettingDecl {
            secret: true,
            ..self
        }
    }
}

impl Lisp {
    /// Declare a setting from Rust (the same registry `defsetting` writes).
    pub fn declare_setting(&self, decl: &SettingDecl) -> Result<(), LispError> {
        let oml: Table = self.lua.globals().get("oml")?;
        let define: Function = oml.get("defsetting*")?;
        let opts = self.lua.create_table()?;
        let ty = to_lua(&self.lua, &decl.ty)?;
        opts.set("type", ty)?;
        opts.set("doc", decl.doc)?;
        opts.set("secret", decl.secret)?;
        opts.set("file", decl.file)?;
        opts.set("line", decl.line)?;
        let default = self.setting_value(&decl.default)?;
        define.call::<()>((decl.name, default, opts))?;
        Ok(())
    }

    /// The current value of a setting, deserialized; an unknown setting or a value of the wrong
    /// shape is an error that names the setting.
    pub fn setting<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T, LispError> {
        let oml: Table = self.lua.globals().get("oml")?;
        let check: Function = oml.get("check-setting")?;
        let value = self.lookup(name)?;
        if let Some(problem) = check.call::<Option<String>>((name, value.clone()))? {
            return Err(LispError::Setting(problem));
        }
        let json = from_lua(&self.lua, value)?;
        serde_json::from_value(json).map_err(|e| LispError::Setting(format!("{name}: {e}")))
    }

    /// Set a setting from Rust, with the same validation as `setq`.
    pub fn set_setting(&self, name: &str, value: &serde_json::Value) -> Result<(), LispError> {
        let oml: Table = self.lua.globals().get("oml")?;
        let set: Function = oml.get("set-setting!")?;
        let v = self.setting_value(value)?;
        set.call::<Value>((name, v))?;
        Ok(())
    }

    /// A setting's value from JSON. A top-level `null` is nil, the "no value" of an optional
    /// (`string?`) setting; `json.null` is only for nulls inside JSON data.
    fn setting_value(&self, value: &serde_json::Value) -> mlua::Result<Value> {
        match value {
            serde_json::Value::Null => Ok(Value::Nil),
            v => to_lua(&self.lua, v),
        }
    }
}
