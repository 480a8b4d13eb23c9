//! Sessions without Lisp: the in-memory registry of conversations (`registry`), the events a
//! session's loop reports (`event`), the append-only store of session files (`store`), the
//! writer thread of one file (`writer`), the entries those files hold (`entry`), the secrets
//! taken out of them (`redact`), the messages posted for a session's next model call
//! (`inbox`), the contents kept for rewinds (`checkpoint`), the prompts and changes a rewind
//! reads (`history`) and forks (`fork`), the stored messages as readers see them (`stored`),
//! and a session as an ATIF trajectory (`atif`).
//!
//! This layer knows nothing of Lisp, the model, ACP or the terminal: the agent loop drives a
//! session through the `session` namespace (`crate::bind::session`), and the front ends read
//! its events from the sink they gave when they created it.

pub mod atif;
pub mod checkpoint;
pub mod entry;
pub mod event;
pub mod fork;
pub mod history;
pub mod inbox;
pub mod lock;
pub mod redact;
pub mod registry;
pub mod store;
pub mod stored;
pub mod writer;

pub use entry::Entry;
pub use event::AgentEvent;
pub use redact::Redactions;
pub use registry::{EventSink, PromptState, Session, Sessions};
