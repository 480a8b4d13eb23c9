//! One model call through the real client (`LlmClient::stream_chat`) against the fake model,
//! with every event it sent: what the model-client tests of each protocol share.

use oml::cancel::CancelToken;
use oml::llm::{ChatOutcome, ChatRequest, LlmClient, LlmConfig, LlmError, StreamEvent};
use tokio::sync::mpsc;

/// One call; returns its result and every event it sent.
pub async fn chat(
    config: &LlmConfig,
    request: &ChatRequest,
) -> (Result<ChatOutcome, LlmError>, Vec<StreamEvent>) {
    let (events, mut received) = mpsc::unbounded_channel();
    let result = LlmClient::new()
        .stream_chat(config, request, &events, &CancelToken::new())
        .await;
    drop(events);
    let mut all = Vec::new();
    while let Some(event) = received.recv().await {
        all.push(event);
    }
    (result, all)
}
