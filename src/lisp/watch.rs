//! Whether a name still holds the function oml installed there, for the hot paths that skip
//! Lisp while it does (every streamed delta: `session.emit!`, `acp.render-event`).
//!
//! Reading the namespace table takes the Lua lock and two references; at a model's rate that
//! was a tenth of oml's CPU per delta. A [`DefaultWatch`] reads it on the first ask, then once
//! every [`RECHECK_EVERY`] asks, and again on the first ask after [`DefaultWatch::expire`] (a
//! caller expires it when its burst of events ends, so a function redefined between two turns
//! is seen from the first delta of the next). A redefinition made while a reply streams (from
//! the REPL, on another thread, with no order against the stream) takes effect within
//! `RECHECK_EVERY` deltas.
//!
//! It knows the Lua tables and nothing of what the functions do.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use mlua::{Function, Table, Value};

/// Asks answered from the last reading before the table is read again.
pub const RECHECK_EVERY: u32 = 64;

/// The key `key` of `namespace`, watched for holding `default`.
pub struct DefaultWatch {
    namespace: Table,
    key: &'static str,
    default: Function,
    /// Asks since the last reading; `RECHECK_EVERY` or more means read now.
    since: AtomicU32,
    last: AtomicBool,
}

impl DefaultWatch {
    pub fn new(namespace: Table, key: &'static str, default: Function) -> DefaultWatch {
        DefaultWatch {
            namespace,
            key,
            default,
            since: AtomicU32::new(RECHECK_EVERY),
            last: AtomicBool::new(false),
        }
    }

    /// Whether `namespace[key]` is `default` itself (not advised, not redefined), as of the
    /// latest reading.
    pub fn holds_default(&self) -> bool {
        let since = self.since.fetch_add(1, Ordering::Relaxed);
        if since < RECHECK_EVERY {
            return self.last.load(Ordering::Relaxed);
        }
        let holds = matches!(self.namespace.raw_get::<Value>(self.key),
            Ok(Value::Function(f)) if f.to_pointer() == self.default.to_pointer());
        self.last.store(holds, Ordering::Relaxed);
        self.since.store(1, Ordering::Relaxed);
        holds
    }

    /// Read the table again on the next ask.
    pub fn expire(&self) {
        self.since.store(RECHECK_EVERY, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redefinition_is_seen_within_the_recheck_period_and_at_once_after_expire() {
        let lua = mlua::Lua::new();
        let ns = lua.create_table().unwrap();
        let default = lua.create_function(|_, ()| Ok(())).unwrap();
        ns.raw_set("f", &default).unwrap();
        let watch = DefaultWatch::new(ns.clone(), "f", default);
        assert!(watch.holds_default());
        ns.raw_set("f", lua.create_function(|_, ()| Ok(1)).unwrap())
            .unwrap();
        let asks = (0..RECHECK_EVERY)
            .take_while(|_| watch.holds_default())
            .count();
        assert_eq!(
            asks as u32,
            RECHECK_EVERY - 1,
            "seen on the period's last ask"
        );
        assert!(!watch.holds_default());
        ns.raw_set("f", Value::Nil).unwrap();
        watch.expire();
        assert!(!watch.holds_default());
    }

    #[test]
    fn expire_makes_the_next_ask_read_the_table() {
        let lua = mlua::Lua::new();
        let ns = lua.create_table().unwrap();
        let default = lua.create_function(|_, ()| Ok(())).unwrap();
        let watch = DefaultWatch::new(ns.clone(), "f", default.clone());
        assert!(!watch.holds_default(), "nothing there yet");
        ns.raw_set("f", &default).unwrap();
        assert!(!watch.holds_default(), "still the old reading");
        watch.expire();
        assert!(watch.holds_default());
    }
}
