//! The documents of the Agent Trajectory Interchange Format (ATIF, Harbor's RFC 0001) that oml
//! writes, as serde types: a [`Trajectory`] of [`Step`]s with their tool calls, observations
//! and metrics. Only what oml fills in is here; absent fields are left out of the JSON, as
//! ATIF's producers do.
//!
//! It knows nothing of session files: `super` builds these from entries.

use serde::Serialize;
use serde_json::{Map, Value};

/// The ATIF version the documents declare: the first with embedded sub-agent trajectories
/// (`trajectory_id`) and `llm_call_count`, which oml uses; nothing it writes needs a later one.
pub const SCHEMA_VERSION: &str = "ATIF-v1.7";

/// One trajectory: a session, or a sub-agent's embedded in its parent's.
#[derive(Debug, Serialize)]
pub struct Trajectory {
    pub schema_version: &'static str,
    pub session_id: String,
    pub trajectory_id: String,
    pub agent: Agent,
    pub steps: Vec<Step>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    pub final_metrics: FinalMetrics,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subagent_trajectories: Vec<Trajectory>,
}

/// The agent that made a trajectory.
#[derive(Debug, Serialize)]
pub struct Agent {
    pub name: String,
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// Who a step comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    System,
    User,
    Agent,
}

/// One step: a user message, an answer of the model with its tool calls and their results,
/// or an event of the session (a failure, a cancel, a compaction, a rewind).
#[derive(Debug, Serialize)]
pub struct Step {
    pub step_id: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    pub source: Source,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    pub message: Message,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observation: Option<Observation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_copied_context: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_call_count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

impl Step {
    /// A step of `source` saying `message`, numbered later.
    pub fn new(source: Source, message: Message) -> Step {
        Step {
            step_id: 0,
            timestamp: None,
            source,
            model_name: None,
            message,
            reasoning_content: None,
            tool_calls: None,
            observation: None,
            metrics: None,
            is_copied_context: None,
            llm_call_count: None,
            extra: None,
        }
    }
}

/// What a message or a tool's result says: text, or parts when it holds images.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Message {
    Text(String),
    Parts(Vec<Part>),
}

/// A part of a message: text, or an image kept in a file beside the trajectory.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Part {
    Text { text: String },
    Image { source: ImageSource },
}

/// Where an image part's file is, relative to the trajectory's file.
#[derive(Debug, Serialize)]
pub struct ImageSource {
    pub media_type: String,
    pub path: String,
}

/// One tool call of an agent step.
#[derive(Debug, Serialize)]
pub struct ToolCall {
    pub tool_call_id: String,
    pub function_name: String,
    /// The arguments the model sent, as an object (`{}` when they were not one: the text it
    /// sent is then in `extra.raw_arguments`).
    pub arguments: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// The results of an agent step's tool calls.
#[derive(Debug, Default, Serialize)]
pub struct Observation {
    pub results: Vec<ObservationResult>,
}

/// One tool call's result, correlated by its call's id.
#[derive(Debug, Serialize)]
pub struct ObservationResult {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_call_id: Option<String>,
    pub content: Message,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_trajectory_ref: Option<Vec<SubagentRef>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// A sub-agent's trajectory, embedded in the root's `subagent_trajectories`.
#[derive(Debug, Serialize)]
pub struct SubagentRef {
    pub trajectory_id: String,
    pub session_id: String,
}

/// What a step's model calls used.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct Metrics {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// What the whole trajectory used, its sub-agents' included.
#[derive(Debug, Default, Serialize)]
pub struct FinalMetrics {
    pub total_prompt_tokens: u64,
    pub total_completion_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_cached_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_cost_usd: Option<f64>,
    pub total_steps: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}
