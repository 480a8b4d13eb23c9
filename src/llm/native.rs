//! The stream translators of the native protocols behind one type, for the client's read loop:
//! each turns its protocol's events into the chat-shaped chunks the one fold folds, says when
//! the reply is complete (no native protocol sends `[DONE]`), and puts what must go back
//! verbatim into the outcome's message.
//!
//! It knows which translator serves which protocol; nothing of their events.

use serde_json::Value;

use super::{Api, ChatOutcome, anthropic, gemini, responses};

/// The translation state of one reply of a native protocol.
#[derive(Debug)]
pub enum Native {
    Anthropic(anthropic::events::Events),
    Responses(responses::events::Events),
    Gemini(gemini::events::Events),
}

impl Native {
    /// The translator `api` needs; `None` for the chat protocol, whose chunks fold as they are.
    pub fn for_api(api: Api) -> Option<Native> {
        match api {
            Api::Chat => None,
            Api::Anthropic => Some(Native::Anthropic(anthropic::events::Events::new())),
            Api::Responses => Some(Native::Responses(responses::events::Events::new())),
            Api::Gemini => Some(Native::Gemini(gemini::events::Events::new())),
        }
    }

    /// The chat-shaped chunk for one event, if it carries anything for the fold.
    pub fn chunk(&mut self, event: &Value) -> Option<Value> {
        match self {
            Native::Anthropic(events) => events.chunk(event),
            Native::Responses(events) => events.chunk(event),
            Native::Gemini(events) => events.chunk(event),
        }
    }

    /// Whether the reply's last event has arrived.
    pub fn complete(&self) -> bool {
        match self {
            Native::Anthropic(events) => events.complete(),
            Native::Responses(events) => events.complete(),
            // Gemini's stream has no end event; the body's end is the reply's.
            Native::Gemini(_) => false,
        }
    }

    /// Put what the protocol must get back into `outcome`'s message.
    pub fn finish(self, outcome: &mut ChatOutcome) {
        match self {
            Native::Anthropic(events) => events.finish(outcome),
            Native::Responses(events) => events.finish(outcome),
            Native::Gemini(events) => events.finish(outcome),
        }
    }
}
