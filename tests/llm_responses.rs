//! OpenAI's Responses API (`llm.api` `:responses`) against a fake server over real TCP that
//! streams the documented events: the request's shape, the encrypted reasoning kept and sent
//! back verbatim, incomplete and failed replies, and a whole `oml -p` tool turn.

mod support;

use std::time::Duration;

use oml::llm::{Api, ChatOutcome, ChatRequest, LlmConfig, LlmError, StreamEvent, ToolSpec};
use serde_json::{Value, json};
use support::fake_model::{FakeModel, Reply, Step};
use support::home::Env;
use support::responses::{self as r, reply, says};

fn config(fake: &FakeModel) -> LlmConfig {
    LlmConfig {
        base_url: fake.base_url(),
        api: Some(Api::Responses),
        api_key: Some("sk-test".into()),
        model: Some("o4-mini".into()),
        retry_base_delay: Duration::from_millis(10),
        retry_max_delay: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(10),
        ..LlmConfig::default()
    }
}

async fn chat(
    config: &LlmConfig,
    messages: Vec<Value>,
) -> (Result<ChatOutcome, LlmError>, Vec<StreamEvent>) {
    let request = ChatRequest {
        messages,
        tools: vec![ToolSpec {
            name: "ls".into(),
            description: "List a folder".into(),
            parameters: json!({"type": "object"}),
        }],
        model: None,
    };
    support::call::chat(config, &request).await
}

#[tokio::test]
async fn a_tool_turn_keeps_the_encrypted_reasoning_and_asks_for_it() {
    let fake = FakeModel::start([reply(vec![
        r::reasoning(0, "List first.", "gAAAAB-encrypted"),
        r::message(1, &["Listing."]),
        r::call(2, "call_7", "ls", &["{\"pa", "th\":\".\"}"]),
    ])]);
    let messages = vec![
        json!({"role": "system", "content": "You are oml."}),
        json!({"role": "user", "content": "what is here?"}),
    ];
    let (result, events) = chat(&config(&fake), messages).await;
    let outcome = result.expect("the call succeeds");
    assert_eq!(outcome.text, "Listing.");
    assert_eq!(outcome.reasoning, "List first.");
    assert_eq!(outcome.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(outcome.tool_calls[0].id, "call_7");
    assert_eq!(*outcome.tool_calls[0].arguments, "{\"path\":\".\"}");
    assert_eq!(
        outcome.message["reasoning_items"],
        json!([{"type": "reasoning", "id": "rs_0",
            "summary": [{"type": "summary_text", "text": "List first."}],
            "encrypted_content": "gAAAAB-encrypted"}])
    );
    assert_eq!(
        outcome.usage.as_ref().unwrap()["prompt_tokens_details"]["cached_tokens"],
        20
    );
    assert!(events.iter().any(|e| matches!(e, StreamEvent::ToolCall(_))));

    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/responses");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(sent.body["instructions"], "You are oml.");
    assert_eq!(sent.body["store"], false);
    assert_eq!(sent.body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(
        sent.body["tools"][0],
        json!({"type": "function", "name": "ls",
        "description": "List a folder", "parameters": {"type": "object"}, "strict": false})
    );
    assert_eq!(
        sent.body["input"][0]["content"][0],
        json!({"type": "input_text", "text": "what is here?"})
    );
}

#[tokio::test]
async fn the_next_request_sends_the_reasoning_items_back_verbatim() {
    let fake = FakeModel::start([says("Two files.")]);
    let item = json!({"type": "reasoning", "id": "rs_0", "summary": [],
        "encrypted_content": "gAAAAB+/=="});
    let messages = vec![
        json!({"role": "user", "content": "what is here?"}),
        json!({"role": "assistant", "content": null, "reasoning_items": [item],
               "thinking_blocks": [{"type": "thinking", "thinking": "x", "signature": "s"}],
               "tool_calls": [{"id": "call_7", "type": "function",
                   "function": {"name": "ls", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "call_7", "content": "a b"}),
    ];
    let (result, _) = chat(&config(&fake), messages).await;
    assert_eq!(result.unwrap().text, "Two files.");
    let input = &fake.requests()[0].body["input"];
    assert_eq!(input[1], item);
    assert_eq!(
        input[2],
        json!({"type": "function_call", "call_id": "call_7", "name": "ls",
        "arguments": "{}"})
    );
    assert_eq!(
        input[3],
        json!({"type": "function_call_output", "call_id": "call_7",
        "output": "a b"})
    );
    assert!(
        !input.to_string().contains("thinking"),
        "another protocol's blocks stay home"
    );
}

#[tokio::test]
async fn an_incomplete_reply_is_a_length_stop_and_a_failed_one_an_error() {
    let fake = FakeModel::start([
        Reply::Events(vec![
            r::event(
                "response.output_text.delta",
                json!({"output_index": 0, "delta": "cut"}),
            ),
            r::event(
                "response.incomplete",
                json!({"response": {
                "incomplete_details": {"reason": "max_output_tokens"}}}),
            ),
        ]),
        Reply::Events(vec![r::event(
            "response.failed",
            json!({"response": {
            "error": {"code": "server_error", "message": "The server had an error"}}}),
        )]),
    ]);
    let config = LlmConfig {
        max_retries: 0,
        ..config(&fake)
    };
    let (result, _) = chat(&config, vec![json!({"role": "user", "content": "hi"})]).await;
    assert!(result.unwrap().hit_length_limit());
    let (result, _) = chat(&config, vec![json!({"role": "user", "content": "hi"})]).await;
    let error = result.expect_err("a failed reply");
    assert!(matches!(error, LlmError::Provider { .. }), "{error:?}");
}

#[tokio::test]
async fn a_stream_that_dies_before_its_last_event_is_broken_and_keeps_the_text() {
    let fake = FakeModel::start([Reply::Events(vec![
        r::event(
            "response.output_text.delta",
            json!({"output_index": 0, "delta": "half"}),
        ),
        Step::Drop,
    ])]);
    let config = LlmConfig {
        max_retries: 0,
        ..config(&fake)
    };
    let (result, _) = chat(&config, vec![json!({"role": "user", "content": "hi"})]).await;
    let error = result.expect_err("a broken stream");
    assert!(matches!(error, LlmError::StreamBroken { .. }), "{error:?}");
    assert_eq!(error.partial().map(|p| p.text.as_str()), Some("half"));
}

/// `oml -p` with `(setq llm.api :responses)`: the whole tool turn goes over the Responses API,
/// and the second request carries the first reply's reasoning item and the command's output.
#[test]
fn print_mode_runs_a_tool_turn_over_the_responses_api() {
    let env = Env::new();
    env.init("(setq llm.api :responses)");
    let fake = FakeModel::start([
        reply(vec![
            r::reasoning(0, "Run it.", "gAAAA-kept"),
            r::call(1, "call_1", "bash", &["{\"command\": \"echo hi\"}"]),
        ]),
        says("It printed hi."),
    ]);
    let out = env
        .command(Some(&fake), &["-p", "--mode", "yolo", "run echo hi"])
        .output()
        .expect("run oml");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("It printed hi."), "{stdout}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.path == "/v1/responses"));
    let input = requests[1].body["input"].as_array().unwrap().clone();
    let kept = input
        .iter()
        .find(|i| i["type"] == "reasoning")
        .expect("the reasoning item");
    assert_eq!(kept["encrypted_content"], "gAAAA-kept");
    let output = input
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap();
    assert_eq!(output["call_id"], "call_1");
    assert!(output["output"].to_string().contains("hi"), "{output}");
}
