//! A stored session as a trajectory in ATIF (the Agent Trajectory Interchange Format of
//! Harbor, where coding harnesses are measured): [`export`] reads a session file, and the files
//! of the sub-agents it ran, and builds one [`Trajectory`] document with the images its
//! messages hold as files to write beside it.
//!
//! What the export shows:
//! - user prompts, the model's answers with their reasoning, tool calls and results (matched
//!   by call id), slash commands, and a step for each event of the session (a prompt that
//!   failed, a cancelled turn, a compaction, a rewind), every step at the time it was written;
//! - each answer's tokens and cost (the difference of the session's running totals across its
//!   model calls), the model it used, and the totals, sub-agents included;
//! - a fork's steps copied from its parent marked `is_copied_context`;
//! - secrets as the session file holds them: taken out when it was written (`redact`).
//!
//! Pure apart from reading session files through the [`Store`]: writing the document and its
//! images is the caller's. It knows nothing of Lisp, ACP or the model's protocol beyond the
//! stored OpenAI messages (`stored`).

mod content;
pub mod types;
mod walk;

use std::collections::HashSet;
use std::io::{BufRead as _, BufReader};
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::entry::{Entry, Header};
use super::store::{Store, valid_id};
pub use content::{Image, Media};
use types::FinalMetrics;
pub use types::Trajectory;

/// How deep sub-agents of sub-agents are embedded; a deeper one is named in its parent's
/// notes, not embedded.
pub const MAX_SUBAGENT_DEPTH: usize = 8;

/// Why a session cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("no session {0} in {1}")]
    NoSession(String, String),
    #[error("cannot read session {id}: {source}")]
    Read {
        id: String,
        #[source]
        source: std::io::Error,
    },
    #[error("session {0} has no header line: it is not a session file")]
    NoHeader(String),
}

/// A trajectory and the images its steps name, to be written beside it.
#[derive(Debug)]
pub struct Export {
    pub trajectory: Trajectory,
    pub images: Vec<Image>,
}

/// One line of a session file with the time it was written.
#[derive(Debug)]
pub struct Timed {
    pub entry: Entry,
    /// Seconds since the epoch (`"at"`); `None` on a line without one.
    pub at: Option<f64>,
}

/// The export of the stored session `id`, with its sub-agents' trajectories embedded; its
/// images go where `media` says.
pub fn export(store: &Store, id: &str, media: &Media) -> Result<Export, ExportError> {
    let mut images = Vec::new();
    let mut seen = HashSet::new();
    let trajectory = trajectory_of(store, id, media, &mut images, &mut seen, 0)?;
    Ok(Export { trajectory, images })
}

/// The trajectory of session `id`, at sub-agent depth `depth`; `seen` holds the sessions
/// already on the way down, so a loop of sub-agent records cannot recurse forever.
fn trajectory_of(
    store: &Store,
    id: &str,
    media: &Media,
    images: &mut Vec<Image>,
    seen: &mut HashSet<String>,
    depth: usize,
) -> Result<Trajectory, ExportError> {
    if !valid_id(id) || !store.exists(id) {
        return Err(ExportError::NoSession(
            id.to_owned(),
            store.dir().display().to_string(),
        ));
    }
    let (header, lines) = read_timed(&store.path(id)).map_err(|source| match source.kind() {
        std::io::ErrorKind::InvalidData => ExportError::NoHeader(id.to_owned()),
        _ => ExportError::Read {
            id: id.to_owned(),
            source,
        },
    })?;
    seen.insert(id.to_owned());
    let walked = walk::walk(&header, &lines, media, id);
    images.extend(walked.images);
    let mut notes = walked.notes;
    let mut steps = walked.steps;
    let down = Down {
        store,
        media,
        depth,
    };
    let subagents = down.embed(walked.subagents, &mut steps, &mut notes, images, seen);
    seen.remove(id);
    if header.parent.is_some() {
        notes.push(
            "The steps copied from the parent session (is_copied_context) are not in final_metrics."
                .to_owned(),
        );
    }
    if !walked.uncounted.is_empty() {
        notes.push(format!(
            "final_metrics also counts the model calls of {} turn(s) that ended without an answer (their metrics are in the cancel or failure step's extra, or came last).",
            walked.uncounted.len()
        ));
    }
    let final_metrics = final_metrics(&steps, &walked.uncounted, &subagents);
    let agent = types::Agent {
        name: "oml".to_owned(),
        version: header.version.clone(),
        model_name: walked.model,
        extra: Some(agent_extra(&header)),
    };
    Ok(Trajectory {
        schema_version: types::SCHEMA_VERSION,
        session_id: id.to_owned(),
        trajectory_id: id.to_owned(),
        agent,
        steps,
        notes: (!notes.is_empty()).then(|| notes.join("\n")),
        final_metrics,
        extra: None,
        subagent_trajectories: subagents,
    })
}

/// Where the sub-agents of a trajectory are read from, and how deep it is.
struct Down<'a> {
    store: &'a Store,
    media: &'a Media,
    depth: usize,
}

impl Down<'_> {
    /// The trajectories of the sub-agents `runs`, each embedded once, with the results of
    /// their calls in `steps` pointing at them; one that cannot be embedded is named in
    /// `notes`.
    fn embed(
        &self,
        runs: Vec<walk::SubagentRun>,
        steps: &mut [types::Step],
        notes: &mut Vec<String>,
        images: &mut Vec<Image>,
        seen: &mut HashSet<String>,
    ) -> Vec<Trajectory> {
        let mut subagents: Vec<Trajectory> = Vec::new();
        for run in runs {
            if subagents.iter().any(|t| t.trajectory_id == run.session) {
                // Named twice: embedded once, both results point at it.
                walk::refer(steps, &run);
                continue;
            }
            if self.depth + 1 >= MAX_SUBAGENT_DEPTH || seen.contains(&run.session) {
                notes.push(format!(
                    "sub-agent session {} not embedded: deeper than {MAX_SUBAGENT_DEPTH} or already on the way down",
                    run.session
                ));
                continue;
            }
            let depth = self.depth + 1;
            match trajectory_of(self.store, &run.session, self.media, images, seen, depth) {
                Ok(child) => {
                    walk::refer(steps, &run);
                    subagents.push(child);
                }
                Err(e) => notes.push(format!("sub-agent session not embedded: {e}")),
            }
        }
        subagents
    }
}

/// What the trajectory's `agent.extra` says of the session: where it ran, when it began, and
/// the session it was forked from.
fn agent_extra(header: &Header) -> Map<String, Value> {
    let mut extra = Map::new();
    if let Some(cwd) = &header.cwd {
        extra.insert("cwd".into(), json!(cwd));
    }
    extra.insert("created".into(), json!(timestamp(header.created)));
    if let Some(parent) = &header.parent {
        extra.insert("forked_from".into(), json!(parent));
        if let Some(p) = header.fork_prompt {
            extra.insert("fork_prompt".into(), json!(p));
        }
    }
    extra
}

/// The totals of `steps` (less those copied from a fork's parent), of the calls no step shows
/// (`uncounted`) and of the sub-agents' trajectories: tokens and cost of every model call this
/// session made. The cost is known only when some call had one.
fn final_metrics(
    steps: &[types::Step],
    uncounted: &[types::Metrics],
    subagents: &[Trajectory],
) -> FinalMetrics {
    let mut total = FinalMetrics {
        total_steps: steps.len(),
        ..FinalMetrics::default()
    };
    let own = steps
        .iter()
        .filter(|s| s.is_copied_context != Some(true))
        .filter_map(|s| s.metrics.as_ref())
        .chain(uncounted);
    for m in own {
        add(
            &mut total,
            m.prompt_tokens,
            m.completion_tokens,
            m.cached_tokens,
            m.cost_usd,
        );
    }
    for sub in subagents {
        let f = &sub.final_metrics;
        add(
            &mut total,
            f.total_prompt_tokens,
            f.total_completion_tokens,
            f.total_cached_tokens,
            f.total_cost_usd,
        );
    }
    total
}

fn add(
    total: &mut FinalMetrics,
    prompt: u64,
    completion: u64,
    cached: Option<u64>,
    cost: Option<f64>,
) {
    total.total_prompt_tokens += prompt;
    total.total_completion_tokens += completion;
    if let Some(c) = cached {
        *total.total_cached_tokens.get_or_insert(0) += c;
    }
    if let Some(c) = cost {
        *total.total_cost_usd.get_or_insert(0.0) += c;
    }
}

/// The latest time a timestamp shows: the last second of the year 9999, the last RFC 3339
/// can write. A later (or odd) `at` in a hand-edited file must not overflow the clock.
const MAX_TIMESTAMP_SECS: f64 = 253_402_300_799.0;

/// `at` seconds since the epoch as RFC 3339 with milliseconds, in UTC; a time before the
/// epoch, after [`MAX_TIMESTAMP_SECS`] or not a number is shown at the nearest end (NaN at 0).
pub fn timestamp(at: f64) -> String {
    let at = if at.is_nan() {
        0.0
    } else {
        at.clamp(0.0, MAX_TIMESTAMP_SECS)
    };
    let whole = at.floor();
    let millis = ((at - whole) * 1000.0).round().min(999.0) as u32;
    let seconds =
        super::store::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs(whole as u64));
    let date = seconds.trim_end_matches('Z');
    format!("{date}.{millis:03}Z")
}

/// The time a line was written, read apart from its entry.
#[derive(Deserialize)]
struct At {
    #[serde(default)]
    at: Option<f64>,
}

/// A session file's header and its entries with their times; torn lines are left out, as the
/// loader leaves them. `InvalidData` when the first line is no header.
pub fn read_timed(path: &Path) -> std::io::Result<(Header, Vec<Timed>)> {
    let file = std::fs::File::open(path)?;
    let mut header = None;
    let mut lines = Vec::new();
    for line in BufReader::new(file).split(b'\n') {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Some(entry) = Entry::parse(&line) else {
            continue;
        };
        match (entry, &header) {
            (Entry::Session(h), None) => header = Some(h),
            (_, None) => break,
            (entry, Some(_)) => {
                let at = serde_json::from_slice::<At>(&line).ok().and_then(|a| a.at);
                lines.push(Timed { entry, at });
            }
        }
    }
    let header = header.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidData))?;
    Ok((header, lines))
}

#[cfg(test)]
mod tests;
