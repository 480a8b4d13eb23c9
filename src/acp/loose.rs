//! [`Loose`]: a member read leniently, as agents and clients differ: of another type, it
//! counts as absent.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A member read as `T` when it is one; absent, null or of another type, `None`.
#[derive(Debug)]
pub struct Loose<T>(pub Option<T>);

impl<T> Default for Loose<T> {
    fn default() -> Self {
        Loose(None)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Loose<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Ok(Loose(T::deserialize(value).ok()))
    }
}

impl<T> Loose<T> {
    /// The value, when there is one of the right type.
    pub fn get(&self) -> Option<&T> {
        self.0.as_ref()
    }
}

/// A string member borrowed from the message, when it is a string; absent, null or of another
/// type, none.
#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
pub enum LooseStr<'a> {
    Str(&'a str),
    #[default]
    #[serde(skip)]
    Absent,
    Other(serde::de::IgnoredAny),
}

impl<'a> LooseStr<'a> {
    pub fn get(&self) -> Option<&'a str> {
        match self {
            LooseStr::Str(s) => Some(s),
            _ => None,
        }
    }
}
