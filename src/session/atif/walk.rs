//! The walk over one session file's entries that makes its trajectory's steps, in the order
//! the loop wrote them: a turn's usage totals and tool records come before its assistant
//! message, its tool results after it.
//!
//! It reads one file's entries only: the sub-agents it meets are returned for `super` to load.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::content::{self, Image, Media};
use super::types::{
    Message, Metrics, Observation, ObservationResult, Source, Step, SubagentRef, ToolCall,
};
use crate::session::entry::{
    CANCEL_KIND, COMMAND_KIND, COMPACTION_KIND, Entry, FAILURE_KIND, Header, MODEL_CALL_KIND,
    SUBAGENT_RUN_KIND, THOUGHT_KIND, TOOL_IMAGES_KIND, lenient,
};
use crate::session::history::{PROMPT_KIND, Rewind};
use crate::session::stored::{StoredMessage, ToolRecords, message_text};

/// What one file's walk found.
pub struct Walked {
    pub steps: Vec<Step>,
    pub images: Vec<Image>,
    pub notes: Vec<String>,
    pub subagents: Vec<SubagentRun>,
    /// The model of the session: the first model call's, else the one chosen for it.
    pub model: Option<String>,
    /// The metrics of model calls no answer shows (a turn cancelled or failed after them, or
    /// the file's end), for the totals; a fork's copied calls are not among them.
    pub uncounted: Vec<Metrics>,
}

/// A sub-agent the session ran for one of its tool calls (a `subagent` entry).
#[derive(Debug, Default, Deserialize)]
pub struct SubagentRun {
    #[serde(default, deserialize_with = "lenient")]
    pub session: String,
    #[serde(default, deserialize_with = "lenient")]
    pub agent: String,
    #[serde(default, deserialize_with = "lenient")]
    pub call: String,
    /// Where the result of its call is: (step, result), once the walk met it.
    #[serde(skip)]
    pub result: Option<(usize, usize)>,
}

/// The session's running totals of model calls (its `usage` data entries).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Totals {
    #[serde(default, deserialize_with = "lenient")]
    pub calls: u64,
    #[serde(rename = "prompt_tokens", default, deserialize_with = "lenient")]
    pub prompt: u64,
    #[serde(rename = "completion_tokens", default, deserialize_with = "lenient")]
    pub completion: u64,
    #[serde(rename = "cache_read_tokens", default, deserialize_with = "lenient")]
    pub cache_read: u64,
    #[serde(default, deserialize_with = "lenient")]
    pub cost: Option<f64>,
}

/// The model and price currency the calls after a `model-call` entry used.
#[derive(Debug, Default, Deserialize)]
struct ModelCall {
    #[serde(default, deserialize_with = "lenient")]
    model: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    currency: Option<String>,
}

/// The walk's state between entries.
struct Walk<'a> {
    media: &'a Media,
    session: &'a str,
    steps: Vec<Step>,
    images: Vec<Image>,
    subagents: Vec<SubagentRun>,
    /// The latest running totals, and those already counted in a step.
    totals: Totals,
    counted: Totals,
    call: ModelCall,
    /// The model chosen for the session (`model` data entry), and the first one a call used.
    chosen_model: Option<String>,
    first_model: Option<String>,
    /// The tool records, by the assistant message they belong to.
    records: ToolRecords,
    thought: Option<String>,
    /// The step of each call id of the latest answers, for its result.
    call_steps: HashMap<String, usize>,
    /// A `tool-images` entry came: the user message after the tool results carries the tools'
    /// images.
    tool_images: bool,
    /// Images met so far, for their file names.
    image_count: usize,
    /// The sub-agents whose call has no result yet, by call id (an index of `subagents`).
    waiting_runs: HashMap<String, usize>,
    uncounted: Vec<Metrics>,
    /// A markdown command was run: the next user message is its expansion.
    expanded: Option<String>,
    /// A fork's: lines written at or before this time are its parent's.
    copied_until: Option<f64>,
    /// The time of the line being read.
    at: Option<f64>,
}

/// The steps of one session file's `lines`.
pub fn walk(header: &Header, lines: &[super::Timed], media: &Media, session: &str) -> Walked {
    let mut w = Walk {
        media,
        session,
        steps: Vec::new(),
        images: Vec::new(),
        subagents: Vec::new(),
        totals: Totals::default(),
        counted: Totals::default(),
        call: ModelCall::default(),
        chosen_model: None,
        first_model: None,
        records: ToolRecords::default(),
        thought: None,
        call_steps: HashMap::new(),
        tool_images: false,
        image_count: 0,
        waiting_runs: HashMap::new(),
        uncounted: Vec::new(),
        expanded: None,
        copied_until: header.parent.as_ref().map(|_| header.created),
        at: None,
    };
    for line in lines {
        w.at = line.at;
        w.entry(&line.entry);
    }
    // Calls after the last answer (a turn that ended without one).
    w.drain_uncounted();
    for (i, step) in w.steps.iter_mut().enumerate() {
        step.step_id = i + 1;
    }
    let mut notes = Vec::new();
    if w.steps.is_empty() {
        // ATIF wants at least one step.
        w.steps.push(Step::new(
            Source::System,
            Message::Text("The session is empty.".into()),
        ));
        w.steps[0].step_id = 1;
        notes.push("The session has no messages: its one step says so.".to_owned());
    }
    Walked {
        steps: w.steps,
        images: w.images,
        notes,
        subagents: w.subagents,
        model: w.first_model.or(w.chosen_model),
        uncounted: w.uncounted,
    }
}

impl Walk<'_> {
    fn entry(&mut self, e: &Entry) {
        if self.records.take(e) {
            return;
        }
        match e {
            Entry::Message { message } => self.message(message),
            Entry::Data { key, value } => self.data(key, value),
            Entry::Custom { kind, data } => self.custom(kind, data, e),
            Entry::Session(_) | Entry::Transcript { .. } | Entry::Unknown => {}
        }
    }

    fn data(&mut self, key: &str, value: &Value) {
        match key {
            "usage" => self.totals = Totals::deserialize(value).unwrap_or_default(),
            "model" => self.chosen_model = value.as_str().map(str::to_owned),
            _ => {}
        }
    }

    fn custom(&mut self, kind: &str, data: &Value, e: &Entry) {
        let text = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        match kind {
            THOUGHT_KIND => self.thought = Some(text("text")).filter(|t| !t.is_empty()),
            MODEL_CALL_KIND => self.call = ModelCall::deserialize(data).unwrap_or_default(),
            SUBAGENT_RUN_KIND => {
                let run = SubagentRun::deserialize(data).unwrap_or_default();
                self.waiting_runs
                    .insert(run.call.clone(), self.subagents.len());
                self.subagents.push(run);
            }
            TOOL_IMAGES_KIND => self.tool_images = true,
            PROMPT_KIND => self.thought = None,
            COMMAND_KIND => self.command(&text("name"), &text("input"), &text("output"), data),
            COMPACTION_KIND => self.compaction(data, &text("summary")),
            FAILURE_KIND => self.end_of_turn("failure", text("message")),
            CANCEL_KIND => self.end_of_turn("cancelled", "The turn was cancelled.".into()),
            _ => {
                if let Some(r) = Rewind::of(e) {
                    let said = format!(
                        "Rewound to just before prompt {} (conversation: {}, files: {}).",
                        r.prompt, r.conversation, r.files
                    );
                    self.expanded = None;
                    self.event("rewind", said, Some(json!(r)));
                }
            }
        }
    }

    /// A turn that ended without an answer, `what` and `said`: the reasoning and model calls
    /// it had belong to no answer. Its calls' metrics go in the step's `extra` and the totals.
    fn end_of_turn(&mut self, what: &str, said: String) {
        self.thought = None;
        let (metrics, calls) = self.take_metrics();
        let detail = metrics
            .as_ref()
            .map(|m| json!({"metrics": m, "llm_call_count": calls}));
        self.event(what, said, detail);
        if let Some(m) = metrics.filter(|_| !self.copied()) {
            self.uncounted.push(m);
        }
    }

    /// The metrics of calls not yet in a step, into the totals only.
    fn drain_uncounted(&mut self) {
        if let (Some(m), _) = self.take_metrics()
            && !self.copied()
        {
            self.uncounted.push(m);
        }
    }

    /// Whether the line being read is a fork's copy of its parent's.
    fn copied(&self) -> bool {
        matches!((self.copied_until, self.at), (Some(until), Some(at)) if at <= until)
    }

    /// A new step of `source` at the line's time.
    fn push(&mut self, source: Source, message: Message) -> &mut Step {
        let mut step = Step::new(source, message);
        step.timestamp = self.at.map(super::timestamp);
        if self.copied() {
            step.is_copied_context = Some(true);
        }
        self.steps.push(step);
        let last = self.steps.len() - 1;
        &mut self.steps[last]
    }

    /// A system step for an event of the session: `what` it was, `said` in words.
    fn event(&mut self, what: &str, said: String, detail: Option<Value>) {
        let mut extra = Map::new();
        extra.insert("oml_event".into(), json!(what));
        if let Some(d) = detail {
            extra.insert("detail".into(), d);
        }
        self.push(Source::System, Message::Text(said)).extra = Some(extra);
    }

    fn command(&mut self, name: &str, input: &str, output: &str, data: &Value) {
        let typed = format!("/{name}{}{input}", if input.is_empty() { "" } else { " " });
        let extra = json!({"oml_event": "command", "command": name});
        self.push(Source::User, Message::Text(typed)).extra = extra.as_object().cloned();
        if data.get("expanded").and_then(Value::as_bool) == Some(true) {
            self.expanded = Some(name.to_owned());
        }
        if !output.is_empty() {
            let step = self.push(Source::Agent, Message::Text(output.to_owned()));
            step.llm_call_count = Some(0);
            step.extra = extra.as_object().cloned();
        }
    }

    /// A compaction: the model's summary, an agent step with the calls that made it.
    fn compaction(&mut self, data: &Value, summary: &str) {
        let replaced = data.get("replaced").cloned().unwrap_or(Value::Null);
        let (metrics, calls) = self.take_metrics();
        let model = self.model();
        let step = self.push(Source::Agent, Message::Text(summary.to_owned()));
        step.metrics = metrics;
        step.llm_call_count = calls;
        step.model_name = model;
        step.extra = json!({"oml_event": "compaction", "replaced_messages": replaced})
            .as_object()
            .cloned();
    }

    /// The model the latest calls used.
    fn model(&self) -> Option<String> {
        self.call
            .model
            .clone()
            .or_else(|| self.chosen_model.clone())
    }

    /// The metrics of the model calls not yet counted in a step, and how many there were.
    fn take_metrics(&mut self) -> (Option<Metrics>, Option<u64>) {
        if self.totals.calls < self.counted.calls {
            // The totals were reset (`usage` removed): count from zero.
            self.counted = Totals::default();
        }
        let calls = self.totals.calls - self.counted.calls;
        if calls == 0 {
            return (None, None);
        }
        let metrics = metrics_between(&self.counted, &self.totals, self.call.currency.as_deref());
        self.counted = self.totals.clone();
        if self.first_model.is_none() {
            self.first_model = self.model();
        }
        (Some(metrics), Some(calls))
    }

    fn message(&mut self, message: &Value) {
        let m = StoredMessage::of(message);
        match m.role.as_deref() {
            Some("user") => self.user(&m),
            Some("assistant") => self.assistant(&m),
            Some("tool") => self.tool_result(&m),
            _ => {}
        }
    }

    fn user(&mut self, m: &StoredMessage) {
        let said = content::message(
            &m.content,
            self.media,
            self.session,
            &mut self.image_count,
            &mut self.images,
        );
        let answer = self.steps.iter().rposition(|s| s.source == Source::Agent);
        if let (true, Some(i)) = (std::mem::take(&mut self.tool_images), answer) {
            // The images the tool calls returned, which the loop sends as a user message
            // right after their results (a `tool-images` entry said so).
            let result = ObservationResult {
                source_call_id: None,
                content: said,
                subagent_trajectory_ref: None,
                extra: json!({"oml_event": "tool_images"}).as_object().cloned(),
            };
            let step = &mut self.steps[i];
            step.observation
                .get_or_insert_with(Observation::default)
                .results
                .push(result);
            return;
        }
        self.thought = None;
        let expanded = self.expanded.take();
        let step = self.push(Source::User, said);
        if let Some(name) = expanded {
            step.extra = json!({"oml_event": "command_expansion", "command": name})
                .as_object()
                .cloned();
        }
    }

    fn assistant(&mut self, m: &StoredMessage) {
        self.records.answer();
        let reasoning = m.reasoning().map(str::to_owned).or(self.thought.take());
        let calls: Vec<ToolCall> = m.calls().map(|c| self.tool_call(&c)).collect();
        let (metrics, count) = self.take_metrics();
        let model = self.model();
        let index = self.steps.len();
        let step = self.push(Source::Agent, Message::Text(message_text(&m.content)));
        step.reasoning_content = reasoning;
        step.metrics = metrics;
        step.llm_call_count = count;
        step.model_name = model;
        if !calls.is_empty() {
            for c in &calls {
                self.call_steps.insert(c.tool_call_id.clone(), index);
            }
            self.steps[index].tool_calls = Some(calls);
        }
    }

    fn tool_call(&self, call: &crate::session::stored::StoredCall) -> ToolCall {
        let id = call.id.clone().unwrap_or_default();
        let mut extra = Map::new();
        let arguments = match call.arguments() {
            Some(v @ Value::Object(_)) => v,
            _ => {
                let raw = call.function.arguments.clone().unwrap_or_default();
                if !raw.trim().is_empty() {
                    extra.insert("raw_arguments".into(), json!(raw));
                }
                json!({})
            }
        };
        if let Some(r) = self.records.of(&id) {
            if let Some(title) = r.title.as_deref().filter(|t| !t.trim().is_empty()) {
                extra.insert("title".into(), json!(title));
            }
            if let Some(kind) = &r.kind {
                extra.insert("kind".into(), json!(kind));
            }
        }
        ToolCall {
            tool_call_id: id,
            function_name: call.function.name.clone().unwrap_or_else(|| "tool".into()),
            arguments,
            extra: (!extra.is_empty()).then_some(extra),
        }
    }

    fn tool_result(&mut self, m: &StoredMessage) {
        let id = m.tool_call_id.clone().unwrap_or_default();
        let content = Message::Text(message_text(&m.content));
        let mut extra = Map::new();
        if let Some(r) = self.records.of(&id) {
            if r.error {
                extra.insert("error".into(), json!(true));
            }
            if let Some(diff) = r.diff.as_ref().filter(|d| d.is_object()) {
                extra.insert("diff".into(), diff.clone());
            }
        }
        let Some(&index) = self.call_steps.get(&id) else {
            // A result of no call this file shows: an event, so no reference dangles.
            let said = message_text(&m.content);
            return self.event("tool_result", said, Some(json!({"tool_call_id": id})));
        };
        let run = self.waiting_runs.remove(&id);
        let result = ObservationResult {
            source_call_id: Some(id),
            content,
            subagent_trajectory_ref: None,
            extra: (!extra.is_empty()).then_some(extra),
        };
        let results = &mut self.steps[index]
            .observation
            .get_or_insert_with(Observation::default)
            .results;
        results.push(result);
        if let Some(r) = run {
            self.subagents[r].result = Some((index, results.len() - 1));
        }
    }
}

/// Point the result of the tool call that ran `run` (the first result of its call after its
/// `subagent` entry) at the sub-agent's embedded trajectory.
pub fn refer(steps: &mut [Step], run: &SubagentRun) {
    let Some((step, index)) = run.result else {
        return;
    };
    let result = steps
        .get_mut(step)
        .and_then(|s| s.observation.as_mut())
        .and_then(|o| o.results.get_mut(index));
    if let Some(result) = result {
        result.subagent_trajectory_ref = Some(vec![SubagentRef {
            trajectory_id: run.session.clone(),
            session_id: run.session.clone(),
        }]);
        let extra = result.extra.get_or_insert_with(Map::new);
        extra.insert("subagent".into(), json!(run.agent));
    }
}

/// The metrics of model calls whose running totals went from `before` to `after`; a cost in
/// a currency other than US dollars goes in `extra`, with its currency.
fn metrics_between(before: &Totals, after: &Totals, currency: Option<&str>) -> Metrics {
    let cost = after
        .cost
        .map(|c| c - before.cost.unwrap_or(0.0))
        .filter(|c| *c >= 0.0);
    let usd = matches!(currency, None | Some("USD"));
    let mut extra = Map::new();
    if let (Some(c), false) = (cost, usd) {
        extra.insert("cost".into(), json!(c));
        extra.insert("currency".into(), json!(currency));
    }
    Metrics {
        prompt_tokens: after.prompt.saturating_sub(before.prompt),
        completion_tokens: after.completion.saturating_sub(before.completion),
        cached_tokens: (after.cache_read > 0)
            .then(|| after.cache_read.saturating_sub(before.cache_read)),
        cost_usd: cost.filter(|_| usd),
        extra: (!extra.is_empty()).then_some(extra),
    }
}
