//! Google's Gemini API (`llm.api` `:gemini`) against a fake server over real TCP that streams
//! `GenerateContentResponse`s: the request's URL, key header, converted tool schemas and named
//! function responses; thought signatures kept and returned on their parts; errors, a dying
//! stream, and a whole `oml -p` tool turn configured by the `GEMINI_*` variables alone.

mod support;

use std::time::Duration;

use oml::llm::{Api, ChatOutcome, ChatRequest, LlmConfig, LlmError, StreamEvent, ToolSpec};
use serde_json::{Value, json};
use support::fake_model::{FakeModel, Reply, Step};
use support::gemini::{last, parts, says};
use support::home::Env;

fn config(fake: &FakeModel) -> LlmConfig {
    LlmConfig {
        base_url: fake.base_url().trim_end_matches("/v1").to_owned(),
        api: Some(Api::Gemini),
        api_key: Some("gk-test".into()),
        model: Some("gemini-fake".into()),
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
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object", "additionalProperties": false,
                "properties": {"path": {"type": "string"},
                               "limit": {"type": ["integer", "null"]}},
                "required": ["path"]}),
        }],
        model: None,
    };
    support::call::chat(config, &request).await
}

#[tokio::test]
async fn a_tool_turn_keeps_the_thought_signatures_and_converts_the_schema() {
    let fake = FakeModel::start([Reply::Events(vec![
        parts(json!([{"text": "The file first.", "thought": true}])),
        parts(json!([{"text": "Let me ", "thoughtSignature": "dGV4dA=="}])),
        last(
            json!([{"text": "look."},
                   {"functionCall": {"name": "read", "args": {"path": "a.txt"}},
                    "thoughtSignature": "Y2FsbA=="}]),
            "STOP",
        ),
    ])]);
    let messages = vec![
        json!({"role": "system", "content": "You are oml."}),
        json!({"role": "user", "content": "what is in a.txt?"}),
    ];
    let (result, events) = chat(&config(&fake), messages).await;
    let outcome = result.expect("the call succeeds");
    assert_eq!(outcome.text, "Let me look.");
    assert_eq!(outcome.reasoning, "The file first.");
    assert_eq!(outcome.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(outcome.tool_calls[0].name, "read");
    assert_eq!(*outcome.tool_calls[0].arguments, "{\"path\":\"a.txt\"}");
    assert_eq!(
        outcome.message["thought_signatures"],
        json!({"text": "dGV4dA==", "calls": ["Y2FsbA=="]})
    );
    assert_eq!(outcome.usage.as_ref().unwrap()["completion_tokens"], 12);
    assert!(events.iter().any(|e| matches!(e, StreamEvent::ToolCall(_))));

    let sent = &fake.requests()[0];
    assert_eq!(
        sent.path,
        "/v1beta/models/gemini-fake:streamGenerateContent?alt=sse"
    );
    assert_eq!(sent.header("x-goog-api-key"), Some("gk-test"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.body["systemInstruction"],
        json!({"parts": [{"text": "You are oml."}]})
    );
    assert_eq!(
        sent.body["tools"][0]["functionDeclarations"][0]["parameters"],
        json!({"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string"}, "limit": {"type": "integer", "nullable": true}}})
    );
    assert!(sent.body.get("model").is_none(), "the model is in the URL");
}

#[tokio::test]
async fn the_next_request_returns_each_signature_on_its_part() {
    let fake = FakeModel::start([says("It says hi.")]);
    let messages = vec![
        json!({"role": "user", "content": "what is in a.txt?"}),
        json!({"role": "assistant", "content": "Let me look.",
               "thought_signatures": {"text": "dGV4dA==", "calls": ["Y2FsbA=="]},
               "thinking_blocks": [{"type": "thinking", "thinking": "x", "signature": "s"}],
               "tool_calls": [{"id": "call_0", "type": "function",
                   "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}}]}),
        json!({"role": "tool", "tool_call_id": "call_0", "content": "hi"}),
    ];
    let (result, _) = chat(&config(&fake), messages).await;
    assert_eq!(result.unwrap().text, "It says hi.");
    let contents = &fake.requests()[0].body["contents"];
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [
            {"text": "Let me look.", "thoughtSignature": "dGV4dA=="},
            {"functionCall": {"name": "read", "args": {"path": "a.txt"}},
             "thoughtSignature": "Y2FsbA=="}]})
    );
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "read", "response": {"result": "hi"}}}]})
    );
}

#[tokio::test]
async fn a_503_is_retried_and_a_stream_without_a_finish_reason_is_broken() {
    let fake = FakeModel::start([
        Reply::error(
            503,
            r#"{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}"#,
        ),
        says("made it"),
        Reply::Events(vec![parts(json!([{"text": "half"}])), Step::Drop]),
    ]);
    let (result, _) = chat(
        &config(&fake),
        vec![json!({"role": "user", "content": "hi"})],
    )
    .await;
    assert_eq!(result.unwrap().text, "made it");
    let config = LlmConfig {
        max_retries: 0,
        ..config(&fake)
    };
    let (result, _) = chat(&config, vec![json!({"role": "user", "content": "hi"})]).await;
    let error = result.expect_err("a broken stream");
    assert!(matches!(error, LlmError::StreamBroken { .. }), "{error:?}");
    assert_eq!(error.partial().map(|p| p.text.as_str()), Some("half"));
}

#[tokio::test]
async fn an_error_in_the_stream_after_text_is_final() {
    let fake = FakeModel::start([Reply::Events(vec![
        parts(json!([{"text": "partial"}])),
        Step::Chunk(json!({"error": {"code": 500, "message": "internal", "status": "INTERNAL"}})),
    ])]);
    let (result, _) = chat(
        &config(&fake),
        vec![json!({"role": "user", "content": "hi"})],
    )
    .await;
    let error = result.expect_err("the call fails");
    assert!(matches!(error, LlmError::Provider { .. }), "{error:?}");
    assert_eq!(fake.requests().len(), 1);
}

/// `oml -p` with only the `GEMINI_*` variables: the whole tool turn goes over Gemini's API, and
/// the second request returns the call's signature and the command's output.
#[test]
fn print_mode_runs_a_tool_turn_over_gemini_from_the_gemini_variables() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::Events(vec![last(
            json!([{"functionCall": {"name": "bash", "args": {"command": "echo hi"}},
                    "thoughtSignature": "U0lH"}]),
            "STOP",
        )]),
        says("It printed hi."),
    ]);
    let root = fake.base_url().trim_end_matches("/v1").to_owned();
    let out = env
        .command(None, &["-p", "--mode", "yolo", "run echo hi"])
        .env("GEMINI_API_KEY", "gk-env")
        .env("GOOGLE_GEMINI_BASE_URL", &root)
        .env("GEMINI_MODEL", "gemini-fake")
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
    assert!(
        requests
            .iter()
            .all(|r| r.header("x-goog-api-key") == Some("gk-env"))
    );
    let contents = &requests[1].body["contents"];
    assert_eq!(contents[1]["parts"][0]["thoughtSignature"], "U0lH");
    let response = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(response["name"], "bash");
    assert!(
        response["response"]["result"].to_string().contains("hi"),
        "{response}"
    );
}

/// A session that moves from Gemini to chat is told, as a thought, that the signatures kept for
/// Gemini are not sent; the chat request carries none of them.
#[test]
fn moving_a_session_to_another_protocol_says_what_is_not_sent() {
    let env = Env::new();
    let fake = FakeModel::start([
        Reply::Events(vec![last(
            json!([{"text": "signed", "thoughtSignature": "R0VNSU5J"}]),
            "STOP",
        )]),
        Reply::Stream(support::fake_model::text_chunks(&["plain"])),
    ]);
    let run = |args: &[&str]| {
        let out = env.run(Some(&fake), args);
        assert_eq!(out.code, 0, "{out:?}");
        out
    };
    run(&["-p", "/api gemini"]);
    run(&["-p", "-c", "hi"]);
    run(&["-p", "-c", "/api chat"]);
    let last_run = run(&["-p", "-c", "--json", "again"]);
    assert!(
        last_run.stdout.contains(
            "Switched from the gemini protocol to chat: the reasoning kept for gemini is not sent."
        ),
        "{last_run:?}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].path.contains(":streamGenerateContent"));
    let chat = requests[1].body.to_string();
    assert!(
        !chat.contains("R0VNSU5J") && !chat.contains("thought_signatures"),
        "{chat}"
    );
}
