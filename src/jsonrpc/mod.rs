//! Newline-delimited JSON-RPC 2.0 over a pair of tokio byte streams: framing, classification,
//! request ids, routing of answers, and one ordered writer per connection.
//!
//! Both faces of oml speak through this module. As an ACP agent, oml serves an editor over its own
//! stdin and stdout. As an ACP client, it drives agent subprocesses over their pipes. The idea is
//! two tasks per [`Connection`]. A reader task cuts the incoming bytes into lines (at byte level,
//! under a large cap) and turns each line into one [`Message`]. It routes responses to the pending
//! [`Connection::request`] that owns their id and hands everything else to the owner as
//! [`Incoming`]. A writer task owns the write half and writes every enqueued message as one line,
//! in the order it was enqueued. So concurrent senders never interleave bytes, and "every update
//! of a turn before the turn's response" is just queue order.
//!
//! It deliberately knows nothing of ACP methods, sessions or Lisp. Params and results are
//! `serde_json::Value`s or anything `Serialize`, and the policy on bad input is the caller's: an
//! agent answers it ([`Connection::respond_malformed`]); a client logs it as noise and may give
//! up after too many consecutive bad lines ([`Incoming::Malformed`] carries the count).
//!
//! Compare with pi: RPC mode (`docs/rpc.md`) is strictly LF-delimited JSONL too, but with pi's
//! own commands rather than JSON-RPC. Compare with oml.clj: `oml.acp` wrote under a lock and read
//! on one thread that also ran handlers, so `request!` had to refuse to run on it; here the reader
//! never runs owner code, so a handler may always await a request.
mod connection;
mod error;
mod frame;
mod limits;
mod message;
mod reader;
mod state;
mod writer;

pub use connection::{
    AnswerHook, CANCEL_REQUEST, Connection, Flow, IncomingHandler, Options, RequestError, SendError,
};
pub use error::*;
pub use frame::FrameReader;
pub use limits::*;
pub use message::{
    Incoming, Malformed, MalformedKind, Message, Notification, Request, RequestId, Response,
    classify,
};
