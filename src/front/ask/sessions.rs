//! `oml ask AGENT status`, `cancel` and `sessions list|show|history|close`: what an owner and a
//! session's record say, for a person (text) or a script (`--json`, one JSON value).

use serde_json::json;

use super::Output;
use super::status;
use crate::ask::asker;
use crate::ask::record::{self, Record};
use crate::ask::wire::{Event, Request};
use crate::ask::{Key, Place};
use crate::front::stdio::out;
use crate::paths::Paths;

/// The owner's `status`, or `dead` (a record, no owner) or `none`.
pub async fn show_status(place: &Place, key: &Key, output: Output) -> i32 {
    let record = Record::read(&place.record);
    let reply = match asker::ask_running(place, &Request::Status).await {
        Ok(Some(mut c)) => c.next().await.ok().flatten(),
        _ => None,
    };
    let status = match reply {
        Some(Event::Status(s)) => json!(s),
        _ => json!({"state": if record.session_id.is_some() { "dead" } else { "none" },
                    "session_id": record.session_id}),
    };
    if output == Output::Json {
        out!(
            "{}",
            json!({"agent": key.agent, "cwd": key.cwd, "name": key.name, "status": status})
        );
        return status::END_TURN;
    }
    out!("{}: {}", key.name, status["state"].as_str().unwrap_or("?"));
    let fields = [
        ("session", "session_id"),
        ("owner pid", "owner_pid"),
        ("agent pid", "agent_pid"),
        ("uptime (s)", "uptime_secs"),
        ("queued", "queued"),
        ("ends in (s)", "ends_in_secs"),
        ("last prompt", "last_prompt"),
    ];
    for (label, field) in fields {
        match &status[field] {
            serde_json::Value::Null => {}
            serde_json::Value::String(s) => out!("  {label}: {s}"),
            v => out!("  {label}: {v}"),
        }
    }
    status::END_TURN
}

/// Sends `session/cancel` for the running prompt, through the owner.
pub async fn cancel(place: &Place, output: Output) -> i32 {
    let what = match asker::ask_running(place, &Request::Cancel).await {
        Ok(Some(mut c)) => match c.next().await {
            Ok(Some(Event::Ack { what })) => what,
            _ => "the owner did not answer".to_owned(),
        },
        _ => "no owner is running: nothing to cancel".to_owned(),
    };
    if output == Output::Json {
        out!("{}", json!({"cancel": what}));
    } else {
        out!("{what}");
    }
    status::END_TURN
}

/// Every kept session of this agent, newest first: its name, directory, id, state.
pub async fn sessions_list(paths: &Paths, key: &Key, output: Output) -> i32 {
    let mut rows = Vec::new();
    for (_, r) in record::all(&crate::ask::records_dir(paths)) {
        let Some(k) = r.key.clone() else { continue };
        if k.agent != key.agent {
            continue;
        }
        let running = asker::connect(&Place::of(paths, &k)).await.is_ok();
        rows.push((k, r, running));
    }
    if output == Output::Json {
        let list: Vec<_> = rows
            .iter()
            .map(|(k, r, running)| {
                json!({"name": k.name, "cwd": k.cwd, "sessionId": r.session_id,
                "updated": r.updated, "prompts": r.history.len(), "running": running})
            })
            .collect();
        out!("{}", json!(list));
        return status::END_TURN;
    }
    if rows.is_empty() {
        out!("no kept sessions of {}", key.agent);
    }
    for (k, r, running) in rows {
        let here = if k.cwd == key.cwd { "*" } else { " " };
        let state = if running { "running" } else { "stopped" };
        out!(
            "{here} {:<12} {:<8} {:<3} prompts  {}  {}",
            k.name,
            state,
            r.history.len(),
            crate::printable::printable(r.session_id.as_deref().unwrap_or("-")),
            k.cwd.display()
        );
    }
    status::END_TURN
}

/// The record of this session and its owner's state.
pub async fn sessions_show(place: &Place, key: &Key, output: Output) -> i32 {
    show_status(place, key, output).await
}

/// The prompts this session ran, oldest first.
pub fn sessions_history(place: &Place, output: Output) -> i32 {
    let record = Record::read(&place.record);
    if output == Output::Json {
        out!("{}", json!(record.history));
        return status::END_TURN;
    }
    if record.history.is_empty() {
        out!("no prompts yet");
    }
    // What the agent said, and its stop reason and session id, are the agent's text: no escape
    // sequence of theirs reaches the terminal.
    let shown = |text: &str| crate::printable::printable(text).into_owned();
    for e in &record.history {
        out!("[{}] {}  {}", shown(&e.stop_reason), e.at, shown(&e.prompt));
        if !e.text.is_empty() {
            for line in e.text.lines() {
                out!("    {}", shown(line));
            }
        }
    }
    status::END_TURN
}

/// Closes the session (through its owner when one runs) and forgets it.
pub async fn sessions_close(place: &Place, output: Output) -> i32 {
    let said = match asker::ask_running(place, &Request::Close).await {
        Ok(Some(mut c)) => match c.next().await {
            Ok(Some(Event::Ack { what })) => what,
            Ok(Some(Event::Failed { message, .. })) => message,
            _ => "the owner did not answer".to_owned(),
        },
        _ => {
            let _ = std::fs::remove_file(&place.record);
            "closed".to_owned()
        }
    };
    if output == Output::Json {
        out!("{}", json!({"close": said}));
    } else {
        out!("{said}");
    }
    status::END_TURN
}
