//! How a turn ended: ACP's `StopReason`, one enum for the wire (`end_turn`), for Lisp
//! (`end-turn`) and for the agent loop's own names (`max-turns`).
//!
//! It knows the names only, not who sends them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a prompt's turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    Cancelled,
    /// A reason this version does not know, as sent on the wire.
    Other(String),
}

/// The known reasons by their names on the wire.
const WIRE: [(&str, StopReason); 5] = [
    ("end_turn", StopReason::EndTurn),
    ("max_tokens", StopReason::MaxTokens),
    ("max_turn_requests", StopReason::MaxTurnRequests),
    ("refusal", StopReason::Refusal),
    ("cancelled", StopReason::Cancelled),
];

impl StopReason {
    /// The reason named `wire` on the wire (`end_turn`); an unknown name is kept.
    pub fn from_wire(wire: &str) -> StopReason {
        WIRE.iter()
            .find(|(name, _)| *name == wire)
            .map_or_else(|| StopReason::Other(wire.to_owned()), |(_, r)| r.clone())
    }

    /// Its name on the wire.
    pub fn wire(&self) -> &str {
        match self {
            StopReason::Other(name) => name,
            known => WIRE
                .iter()
                .find(|(_, r)| r == known)
                .map_or("end_turn", |(name, _)| name),
        }
    }

    /// Its name in kebab-case (`end-turn`, `max-turn-requests`): what Lisp sees of a reason an
    /// agent sent.
    pub fn kebab(&self) -> String {
        self.wire().replace('_', "-")
    }

    /// The reason the agent loop names `name` (`end-turn`, `max-turns`, `max-tokens`,
    /// `refusal`, `cancelled`, or a name of the program's own, kept in snake_case).
    pub fn from_loop(name: &str) -> StopReason {
        match name {
            "max-turns" => StopReason::MaxTurnRequests,
            other => StopReason::from_wire(&other.replace('-', "_")),
        }
    }

    /// The agent loop's name of this reason (`end-turn`, `max-turns`, …).
    pub fn loop_name(&self) -> String {
        match self {
            StopReason::MaxTurnRequests => "max-turns".to_owned(),
            other => other.kebab(),
        }
    }

    /// The reason as ACP v1 names it to a client: a reason of the program's own ends the turn
    /// normally.
    pub fn or_end_turn(self) -> StopReason {
        match self {
            StopReason::Other(_) => StopReason::EndTurn,
            known => known,
        }
    }
}

impl PartialEq<&str> for StopReason {
    /// Whether this is the reason named `wire` on the wire.
    fn eq(&self, wire: &&str) -> bool {
        self.wire() == *wire
    }
}

impl From<&str> for StopReason {
    /// A reason by its name on the wire.
    fn from(wire: &str) -> StopReason {
        StopReason::from_wire(wire)
    }
}

impl Serialize for StopReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.wire())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(StopReason::from_wire(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_go_both_ways() {
        for (wire, reason) in WIRE {
            assert_eq!(StopReason::from_wire(wire), reason);
            assert_eq!(reason.wire(), wire);
        }
        let other = StopReason::from_wire("paused_for_lunch");
        assert_eq!(other.kebab(), "paused-for-lunch");
        assert_eq!(
            StopReason::from_loop("max-turns").wire(),
            "max_turn_requests"
        );
        assert_eq!(StopReason::from_loop("end-turn"), StopReason::EndTurn);
        assert_eq!(StopReason::from_loop("max-turns").loop_name(), "max-turns");
        assert_eq!(StopReason::from_loop("my-own").or_end_turn(), "end_turn");
        let read: StopReason = serde_json::from_str("\"refusal\"").expect("a reason");
        assert_eq!(read, StopReason::Refusal);
        assert_eq!(
            serde_json::to_string(&StopReason::Cancelled).expect("json"),
            "\"cancelled\""
        );
    }
}
