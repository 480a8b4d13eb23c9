//! The model client against the fake OpenAI-compatible server over real TCP, plus a property
//! test of the pure decode-and-fold path.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use oml::cancel::CancelToken;
use oml::llm::fold::Fold;
use oml::llm::sse::SseDecoder;
use oml::llm::{
    ChatRequest, LlmClient, LlmConfig, LlmError, SendReasoning, StreamEvent, ToolCall, ToolSpec,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::call::chat;
use support::fake_model::{
    FakeModel, Reply, Step, delta_chunk, reasoning_chunks, text_chunks, tool_call_chunks,
    usage_chunk,
};
use tokio::sync::mpsc;

// --- helpers

/// Settings pointing at `fake` (with a trailing slash, which must not matter), with short
/// retry delays so retry tests stay fast.
fn config(fake: &FakeModel) -> LlmConfig {
    LlmConfig {
        base_url: format!("{}/", fake.base_url()),
        api_key: Some("test-key".into()),
        model: Some("fake/model".into()),
        retry_base_delay: Duration::from_millis(10),
        retry_max_delay: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(10),
        ..LlmConfig::default()
    }
}

fn user(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![json!({"role": "user", "content": text})],
        ..ChatRequest::default()
    }
}

fn text(piece: &str) -> StreamEvent {
    StreamEvent::TextDelta(piece.into())
}

fn thought(piece: &str) -> StreamEvent {
    StreamEvent::ThoughtDelta(piece.into())
}

fn done(finish_reason: &str, usage: Option<Value>) -> StreamEvent {
    StreamEvent::Done {
        finish_reason: Some(finish_reason.into()),
        usage,
    }
}

/// The events without `Retry` notices.
fn deltas(events: &[StreamEvent]) -> Vec<StreamEvent> {
    events
        .iter()
        .filter(|event| !matches!(event, StreamEvent::Retry { .. }))
        .cloned()
        .collect()
}

fn retries(events: &[StreamEvent]) -> Vec<Duration> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::Retry { delay, .. } => Some(*delay),
            _ => None,
        })
        .collect()
}

// --- the request

#[tokio::test]
async fn stream_chat_over_http_with_a_trailing_slash_base_url() {
    let fake = FakeModel::start([text_chunks(&["Hel", "lo"])]);
    let mut config = config(&fake);
    config.extra_body = json!({"temperature": 0.5, "stream": false})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let request = ChatRequest {
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        ..user("hi")
    };
    let (result, events) = chat(&config, &request).await;
    let outcome = result.expect("the call succeeds");
    assert_eq!(events, [text("Hel"), text("lo"), done("stop", None)]);
    assert_eq!(
        outcome.transcript_message(),
        json!({"role": "assistant", "content": "Hello"})
    );

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(sent.header("authorization"), Some("Bearer test-key"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(sent.header("accept"), Some("text/event-stream"));
    assert_eq!(sent.body["model"], "fake/model");
    assert_eq!(
        sent.body["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(sent.body["temperature"], 0.5);
    assert_eq!(
        sent.body["tools"],
        json!([{"type": "function", "function": {
            "name": "read", "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}
        }}])
    );
}

#[tokio::test]
async fn no_tools_key_and_no_authorization_without_tools_or_key_and_the_request_model_wins() {
    let fake = FakeModel::start([text_chunks(&["ok"])]);
    let config = LlmConfig {
        api_key: None,
        ..config(&fake)
    };
    let request = ChatRequest {
        model: Some("other/model".into()),
        ..user("hi")
    };
    let (result, _) = chat(&config, &request).await;
    result.expect("the call succeeds");
    let sent = &fake.requests()[0];
    assert!(sent.body.get("tools").is_none(), "{}", sent.body);
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.body["model"], "other/model");
}

#[tokio::test]
async fn a_missing_model_fails_the_call_with_how_to_set_one() {
    let fake = FakeModel::start(Vec::<Reply>::new());
    let config = LlmConfig {
        model: None,
        ..config(&fake)
    };
    let (result, events) = chat(&config, &user("hi")).await;
    let error = result.expect_err("no model");
    assert!(matches!(error, LlmError::NoModel { .. }));
    // The providers found come from this process's environment: the texts are checked apart.
    let how = "run `oml` in a terminal to choose a provider and a model, or set OPENAI_MODEL \
               (e.g. OPENAI_MODEL=gpt-4o-mini) or (setq llm.model \"...\") in init.fnl.";
    assert_eq!(
        LlmError::NoModel { found: vec![] }.to_string(),
        format!("No model configured: {how}")
    );
    let found = vec!["Anthropic".to_owned(), "OpenRouter".to_owned()];
    assert_eq!(
        LlmError::NoModel { found }.to_string(),
        format!("No model configured (found: Anthropic, OpenRouter): {how}")
    );
    assert!(events.is_empty());
    assert!(fake.requests().is_empty(), "nothing is sent");
}

// --- folding over HTTP

#[tokio::test]
async fn sse_parsing_skips_comments_blank_and_event_lines_and_stops_at_done() {
    let fake = FakeModel::start([vec![
        Step::Raw(": keep-alive\n\n".into()),
        Step::Raw("event: message\r\nid: 1\r\nretry: 5\r\n\r\n".into()),
        Step::Chunk(delta_chunk(json!({"content": "a"}), None)),
        Step::Raw("data: ".into()),
        Step::Raw(format!(
            "{}\r\n\r\n",
            delta_chunk(json!({"content": "b"}), Some("stop"))
        )),
        Step::Raw("data: [DONE]\n\n".into()),
        Step::Chunk(delta_chunk(json!({"content": "ignored"}), None)),
    ]]);
    let (result, events) = chat(&config(&fake), &user("hi")).await;
    assert_eq!(result.expect("succeeds").text, "ab");
    assert_eq!(events, [text("a"), text("b"), done("stop", None)]);
}

#[tokio::test]
async fn text_usage_and_finish_reason_accumulate() {
    let mut steps = text_chunks(&["Hel", "lo"]);
    steps.push(usage_chunk(12, 3));
    let fake = FakeModel::start([steps]);
    let (result, events) = chat(&config(&fake), &user("hi")).await;
    let outcome = result.expect("succeeds");
    let usage = json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15});
    assert_eq!(
        events,
        [text("Hel"), text("lo"), done("stop", Some(usage.clone()))]
    );
    assert_eq!(outcome.usage, Some(usage));
    assert_eq!(outcome.finish_reason.as_deref(), Some("stop"));
    assert!(!outcome.hit_length_limit());
}

#[tokio::test]
async fn a_length_finish_reason_is_visible() {
    let fake = FakeModel::start([vec![
        Step::Chunk(delta_chunk(json!({"content": "trunc"}), None)),
        Step::Chunk(delta_chunk(json!({}), Some("length"))),
    ]]);
    let (result, _) = chat(&config(&fake), &user("hi")).await;
    assert!(result.expect("succeeds").hit_length_limit());
}

#[tokio::test]
async fn a_tool_call_streams_as_one_event_at_the_end() {
    let fake = FakeModel::start([tool_call_chunks(
        "call_1",
        "read",
        &["{\"pa", "th\": \"a\"}"],
    )]);
    let (result, events) = chat(&config(&fake), &user("hi")).await;
    let call = ToolCall {
        id: "call_1".into(),
        name: "read".into(),
        arguments: "{\"path\": \"a\"}".to_owned().into(),
    };
    assert_eq!(
        events,
        [
            StreamEvent::ToolCall(call.clone()),
            done("tool_calls", None)
        ]
    );
    let outcome = result.expect("succeeds");
    assert_eq!(outcome.tool_calls, [call]);
    assert_eq!(outcome.transcript_message()["content"], Value::Null);
}

#[tokio::test]
async fn each_reasoning_field_streams_as_thoughts() {
    for field in ["reasoning_content", "reasoning", "reasoning_details"] {
        let mut steps = reasoning_chunks(field, &["Let me ", "think."]);
        steps.extend(text_chunks(&["Done."]));
        let fake = FakeModel::start([steps]);
        let (result, events) = chat(&config(&fake), &user("hi")).await;
        assert_eq!(
            events,
            [
                thought("Let me "),
                thought("think."),
                text("Done."),
                done("stop", None)
            ],
            "{field}"
        );
        let outcome = result.expect("succeeds");
        assert_eq!(outcome.reasoning, "Let me think.", "{field}");
        assert!(
            outcome
                .transcript_message()
                .get("reasoning_content")
                .is_none(),
            "{field}: off by default"
        );
    }
}

#[tokio::test]
async fn send_reasoning_keeps_the_reasoning_in_the_message() {
    let mut steps = reasoning_chunks("reasoning_content", &["hmm"]);
    steps.extend(text_chunks(&["yes"]));
    let fake = FakeModel::start([steps]);
    let config = LlmConfig {
        send_reasoning: Some(SendReasoning::Always),
        ..config(&fake)
    };
    let (result, _) = chat(&config, &user("hi")).await;
    assert_eq!(
        result.expect("succeeds").transcript_message(),
        json!({"role": "assistant", "content": "yes", "reasoning_content": "hmm"})
    );
}

#[tokio::test]
async fn on_chunk_sees_raw_fields_and_its_errors_do_not_stop_the_stream() {
    let mut steps = reasoning_chunks("reasoning", &["r"]);
    steps.extend(text_chunks(&["a", "b"]));
    let fake = FakeModel::start([steps]);
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let config = LlmConfig {
        on_chunk: Some({
            let seen = Arc::clone(&seen);
            Arc::new(move |chunk: &Value| {
                let mut seen = seen.lock().expect("not poisoned");
                seen.push(chunk.clone());
                if seen.len() == 1 {
                    Err("boom".into())
                } else {
                    Ok(())
                }
            })
        }),
        ..config(&fake)
    };
    let (result, events) = chat(&config, &user("hi")).await;
    assert_eq!(result.expect("the stream goes on").text, "ab");
    assert_eq!(
        events,
        [thought("r"), text("a"), text("b"), done("stop", None)]
    );
    let seen = seen.lock().expect("not poisoned");
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[0]["choices"][0]["delta"]["reasoning"], "r");
    assert_eq!(seen[0]["object"], "chat.completion.chunk");
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_is_still_understood() {
    let fake = FakeModel::start([Reply::Json(json!({
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "whole"}}],
        "usage": {"total_tokens": 4},
    }))]);
    let (result, events) = chat(&config(&fake), &user("hi")).await;
    assert_eq!(
        events,
        [
            text("whole"),
            done("stop", Some(json!({"total_tokens": 4})))
        ]
    );
    assert_eq!(result.expect("succeeds").text, "whole");
}

// --- failures and retries

#[tokio::test]
async fn an_http_error_says_the_providers_message_once_and_keeps_the_body() {
    let fake = FakeModel::start([Reply::error(500, "{\"error\": \"kaboom\"}")]);
    let config = LlmConfig {
        max_retries: 0,
        ..config(&fake)
    };
    let (result, _) = chat(&config, &user("hi")).await;
    let error = result.expect_err("fails");
    assert_eq!(error.status(), Some(500));
    assert_eq!(error.to_string(), "Model request failed: HTTP 500: kaboom");
    assert!(
        matches!(&error, oml::llm::LlmError::Http { body, .. } if body == "{\"error\": \"kaboom\"}"),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_error_body_is_capped_keeping_its_head() {
    let long = format!("HEAD{}", "x".repeat(20_000));
    let fake = FakeModel::start([Reply::error(400, &long)]);
    let (result, _) = chat(&config(&fake), &user("hi")).await;
    let LlmError::Http { body, .. } = result.expect_err("fails") else {
        panic!("an HTTP error");
    };
    assert!(body.starts_with("HEAD"));
    assert!(body.len() <= oml::llm::MAX_ERROR_BODY_BYTES + '…'.len_utf8());
}

/// Status code → whether the client tries again.
#[tokio::test]
async fn which_statuses_are_retried() {
    for (status, retried) in [
        (429, true),
        (500, true),
        (502, true),
        (503, true),
        (400, false),
        (401, false),
        (404, false),
    ] {
        let fake = FakeModel::start([Reply::error(status, "nope")]);
        fake.push(text_chunks(&["ok"]));
        let (result, events) = chat(&config(&fake), &user("hi")).await;
        assert_eq!(
            fake.requests().len(),
            if retried { 2 } else { 1 },
            "{status}"
        );
        assert_eq!(result.is_ok(), retried, "{status}");
        assert_eq!(retries(&events).len(), usize::from(retried), "{status}");
    }
}

#[tokio::test]
async fn a_429_is_retried_after_the_servers_retry_after() {
    let fake = FakeModel::start([Reply::Error {
        status: 429,
        body: "slow down".into(),
        retry_after: Some("1".into()),
    }]);
    fake.push(text_chunks(&["ok"]));
    let config = LlmConfig {
        retry_max_delay: Duration::from_secs(5),
        ..config(&fake)
    };
    let (result, events) = chat(&config, &user("hi")).await;
    assert_eq!(result.expect("the retry succeeds").text, "ok");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(retries(&events), [Duration::from_secs(1)]);
    // What the server saw: the second request a second after the first, as it asked.
    let gap = requests[1].arrived - requests[0].arrived;
    assert!(gap >= Duration::from_millis(900), "retried after {gap:?}");
    let StreamEvent::Retry {
        attempt, reason, ..
    } = &events[0]
    else {
        panic!("a retry notice first: {events:?}");
    };
    assert_eq!(*attempt, 1);
    assert!(
        reason.contains("429") && reason.contains("slow down"),
        "{reason}"
    );
}

#[tokio::test]
async fn retries_stop_after_max_retries_with_the_last_error() {
    let fake = FakeModel::start((0..3).map(|_| Reply::error(503, "busy")));
    let config = LlmConfig {
        max_retries: 2,
        ..config(&fake)
    };
    let (result, events) = chat(&config, &user("hi")).await;
    assert_eq!(
        result.expect_err("gives up").to_string(),
        "Model request failed: HTTP 503: busy"
    );
    assert_eq!(fake.requests().len(), 3);
    assert_eq!(
        retries(&events),
        [Duration::from_millis(10), Duration::from_millis(20)]
    );
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_reported() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let config = LlmConfig {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        model: Some("m".into()),
        max_retries: 1,
        retry_base_delay: Duration::from_millis(10),
        ..LlmConfig::default()
    };
    let (result, events) = chat(&config, &user("hi")).await;
    let error = result.expect_err("nobody listens");
    assert!(matches!(error, LlmError::Connect { .. }), "{error}");
    assert!(
        error.to_string().contains(&format!("127.0.0.1:{port}")),
        "{error}"
    );
    assert_eq!(retries(&events).len(), 1);
}

#[tokio::test]
async fn a_connection_closed_before_any_delta_is_retried() {
    let fake = FakeModel::start([
        vec![Step::Drop],
        vec![
            Step::Chunk(delta_chunk(json!({"role": "assistant"}), None)),
            Step::Drop,
        ],
    ]);
    fake.push(text_chunks(&["ok"]));
    let (result, events) = chat(&config(&fake), &user("hi")).await;
    assert_eq!(result.expect("the third attempt succeeds").text, "ok");
    assert_eq!(fake.requests().len(), 3);
    assert_eq!(deltas(&events), [text("ok"), done("stop", None)]);
}

#[tokio::test]
async fn a_stream_that_breaks_after_a_delta_is_not_retried_and_keeps_the_partial_text() {
    let mut steps = text_chunks(&["par", "tial"]);
    steps.truncate(2);
    steps.push(Step::Chunk(delta_chunk(
        json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "bash", "arguments": "{"}}]}),
        None,
    )));
    steps.push(Step::Drop);
    let fake = FakeModel::start([steps]);
    fake.push(text_chunks(&["never"]));
    let (result, events) = chat(&config(&fake), &user("hi")).await;
    let error = result.expect_err("broken");
    assert!(matches!(error, LlmError::StreamBroken { .. }), "{error}");
    let partial = error.partial().expect("a partial reply");
    assert_eq!(partial.text, "partial");
    assert_eq!(
        partial.transcript_message(),
        json!({"role": "assistant", "content": "partial"})
    );
    assert!(partial.tool_calls.is_empty());
    assert_eq!(fake.requests().len(), 1, "no retry after the first delta");
    assert_eq!(events, [text("par"), text("tial")], "no Done, no tool call");
}

#[tokio::test]
async fn a_malformed_chunk_is_an_error_that_quotes_it() {
    let fake = FakeModel::start([vec![
        Step::Chunk(delta_chunk(json!({"content": "so far"}), None)),
        Step::Raw("data: {\"choices\": [oops\n\n".into()),
    ]]);
    let (result, _) = chat(&config(&fake), &user("hi")).await;
    let error = result.expect_err("malformed");
    assert!(matches!(error, LlmError::MalformedChunk { .. }), "{error}");
    assert!(error.to_string().contains("{\"choices\": [oops"), "{error}");
    assert_eq!(
        error.partial().map(|partial| partial.text.as_str()),
        Some("so far")
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_provider_error_mid_stream_keeps_the_partial_text() {
    let fake = FakeModel::start([vec![
        Step::Chunk(delta_chunk(json!({"content": "half"}), None)),
        Step::Chunk(json!({"error": {"code": 502, "message": "upstream gone"}, "choices": []})),
    ]]);
    let (result, _) = chat(&config(&fake), &user("hi")).await;
    let error = result.expect_err("provider error");
    assert!(error.to_string().contains("upstream gone"), "{error}");
    assert_eq!(
        error.partial().map(|partial| partial.text.as_str()),
        Some("half")
    );
}

#[tokio::test]
async fn silence_longer_than_the_idle_timeout_fails_the_call() {
    // Once between reads (with the partial text), once before the response headers.
    let fake = FakeModel::start([
        vec![
            Step::Chunk(delta_chunk(json!({"content": "a"}), None)),
            Step::Hang,
        ],
        vec![Step::Hang],
    ]);
    let config = LlmConfig {
        idle_timeout: Duration::from_millis(300),
        ..config(&fake)
    };
    for expected_partial in ["a", ""] {
        let (result, _) = chat(&config, &user("hi")).await;
        let error = result.expect_err("idle");
        assert!(matches!(error, LlmError::IdleTimeout { .. }), "{error}");
        assert!(error.to_string().contains("llm.idle-timeout"), "{error}");
        assert_eq!(
            error.partial().map(|partial| partial.text.as_str()),
            Some(expected_partial)
        );
    }
    assert_eq!(fake.requests().len(), 2, "idle timeouts are not retried");
}

#[tokio::test]
async fn a_body_that_ends_without_done_needs_a_finish_reason() {
    let fake = FakeModel::start([
        vec![
            Step::Chunk(delta_chunk(json!({"content": "cut"}), None)),
            Step::End,
        ],
        vec![
            Step::Chunk(delta_chunk(json!({"content": "whole"}), Some("stop"))),
            Step::End,
        ],
    ]);
    let (result, _) = chat(&config(&fake), &user("hi")).await;
    let error = result.expect_err("broken");
    assert!(error.to_string().contains("ended before [DONE]"), "{error}");
    assert_eq!(
        error.partial().map(|partial| partial.text.as_str()),
        Some("cut")
    );
    let (result, _) = chat(&config(&fake), &user("hi")).await;
    assert_eq!(result.expect("a finish_reason is enough").text, "whole");
}

// --- cancellation

#[tokio::test]
async fn cancelling_on_the_first_delta_returns_the_partial_text_quickly() {
    let fake = FakeModel::start([vec![
        Step::Chunk(delta_chunk(json!({"content": "partial"}), None)),
        Step::Chunk(delta_chunk(
            json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "bash"}}]}),
            None,
        )),
        Step::Hang,
    ]]);
    let cancel = CancelToken::new();
    let (events, mut received) = mpsc::unbounded_channel();
    let watcher = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let first = received.recv().await;
            cancel.cancel();
            first
        })
    };
    // The stream hangs after its first delta: a result at all is the cancel's doing.
    let result = LlmClient::new()
        .stream_chat(&config(&fake), &user("hi"), &events, &cancel)
        .await;
    let outcome = result.expect("a cancel is not an error");
    assert!(outcome.cancelled);
    assert_eq!(outcome.text, "partial");
    assert_eq!(
        outcome.transcript_message(),
        json!({"role": "assistant", "content": "partial"})
    );
    assert!(
        outcome.tool_calls.is_empty(),
        "half-received tool calls are dropped"
    );
    assert_eq!(watcher.await.expect("watcher"), Some(text("partial")));
}

#[tokio::test]
async fn a_cancelled_token_sends_nothing() {
    let fake = FakeModel::start([text_chunks(&["never"])]);
    let cancel = CancelToken::new();
    cancel.cancel();
    let (events, _received) = mpsc::unbounded_channel();
    let outcome = LlmClient::new()
        .stream_chat(&config(&fake), &user("hi"), &events, &cancel)
        .await
        .expect("cancelled is Ok");
    assert!(outcome.cancelled);
    assert!(fake.requests().is_empty());
}

// --- property: how the bytes are split into reads does not matter

/// Decode and fold `reads` as the client does; returns the events and the final message.
fn decode_and_fold(reads: &[&[u8]]) -> (Vec<StreamEvent>, Value) {
    let mut decoder = SseDecoder::new();
    let mut fold = Fold::new();
    let mut events = Vec::new();
    let mut emit = |event| events.push(event);
    for read in reads {
        decoder.push(read);
        while let Some(payload) = decoder.next_payload().expect("lines are short") {
            fold.push_json(&payload, &mut emit).expect("valid chunks");
        }
    }
    if let Some(payload) = decoder.finish() {
        fold.push_json(&payload, &mut emit).expect("valid chunk");
    }
    let outcome = fold.finish(SendReasoning::Always, &mut emit);
    (events, outcome.transcript_message())
}

/// A stream with text (multi-byte too), reasoning, two interleaved tool calls, usage, CRLF and
/// LF line ends, a comment and `[DONE]`.
fn sample_stream() -> Vec<u8> {
    let chunks = [
        delta_chunk(
            json!({"role": "assistant", "reasoning_content": "pensée → "}),
            None,
        ),
        delta_chunk(json!({"reasoning": "ok"}), None),
        delta_chunk(json!({"content": "Grüße, "}), None),
        delta_chunk(json!({"content": "世界 🌍"}), None),
        delta_chunk(
            json!({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "re", "arguments": "{\"p"}}]}),
            None,
        ),
        delta_chunk(
            json!({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "bash", "arguments": "{}"}}]}),
            None,
        ),
        delta_chunk(
            json!({"tool_calls": [{"index": 0, "function": {"name": "ad", "arguments": "\": 1}"}}]}),
            None,
        ),
        delta_chunk(json!({}), Some("tool_calls")),
        json!({"choices": [], "usage": {"total_tokens": 9}}),
    ];
    let mut bytes = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let end = if i % 2 == 0 { "\n\n" } else { "\r\n\r\n" };
        bytes.extend_from_slice(format!("data: {chunk}{end}").as_bytes());
        if i == 3 {
            bytes.extend_from_slice(b": keep-alive\r\n\r\n");
        }
    }
    bytes.extend_from_slice(b"data: [DONE]\n\n");
    bytes
}

proptest! {
    #[test]
    fn any_split_of_a_stream_into_reads_folds_the_same(
        mut cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..40)
    ) {
        let stream = sample_stream();
        let whole = decode_and_fold(&[&stream]);
        let mut points: Vec<usize> = cuts.drain(..).map(|cut| cut.index(stream.len() + 1)).collect();
        points.sort_unstable();
        let mut reads = Vec::new();
        let mut from = 0;
        for point in points.into_iter().chain([stream.len()]) {
            reads.push(&stream[from..point]);
            from = point;
        }
        prop_assert_eq!(decode_and_fold(&reads), whole);
    }
}

/// Decode and fold whatever `reads` hold, as the client does, taking every error as the value
/// it is: a too-long line or a malformed chunk. Returns the final message, or the first error.
fn decode_and_fold_anything(reads: &[&[u8]]) -> Result<Value, String> {
    let mut decoder = SseDecoder::new();
    let mut fold = Fold::new();
    let mut emit = |_event| {};
    for read in reads {
        decoder.push(read);
        while let Some(payload) = decoder.next_payload().map_err(|e| format!("{e:?}"))? {
            fold.push_json(&payload, &mut emit)
                .map_err(|e| format!("{e:?}"))?;
        }
    }
    if let Some(payload) = decoder.finish() {
        fold.push_json(&payload, &mut emit)
            .map_err(|e| format!("{e:?}"))?;
    }
    Ok(fold
        .finish(SendReasoning::Always, &mut emit)
        .transcript_message())
}

/// Any JSON value, a few levels deep, biased towards the keys a chunk has.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            Just("choices".to_owned()),
            Just("delta".to_owned()),
            Just("content".to_owned()),
            Just("reasoning_content".to_owned()),
            Just("tool_calls".to_owned()),
            Just("index".to_owned()),
            Just("function".to_owned()),
            Just("arguments".to_owned()),
            Just("finish_reason".to_owned()),
            Just("usage".to_owned()),
            Just("error".to_owned()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(key, inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A piece of an SSE body: the syntax the decoder looks for, JSON that may or may not be a
/// chunk, or raw bytes (invalid UTF-8 included), so that random streams reach every path.
fn sse_fragment() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"data:".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b": comment".to_vec()),
        Just(b"[DONE]".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        any_json().prop_map(|v| v.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..12),
    ]
}

proptest! {
    // Fuzzing the pure parts: hostile bytes and hostile JSON give errors or a message, never a
    // panic, and whatever folds still makes an assistant message.
    #[test]
    fn any_bytes_in_any_reads_decode_and_fold_without_panicking(
        fragments in proptest::collection::vec(sse_fragment(), 0..40),
        mut cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..8),
    ) {
        let bytes: Vec<u8> = fragments.concat();
        let mut points: Vec<usize> = cuts.drain(..).map(|cut| cut.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut reads = Vec::new();
        let mut from = 0;
        for point in points.into_iter().chain([bytes.len()]) {
            reads.push(&bytes[from..point]);
            from = point;
        }
        if let Ok(message) = decode_and_fold_anything(&reads) {
            prop_assert_eq!(&message["role"], "assistant");
        }
    }

    #[test]
    fn any_json_chunks_fold_without_panicking(chunks in proptest::collection::vec(any_json(), 0..6)) {
        let mut stream = Vec::new();
        for chunk in &chunks {
            stream.extend_from_slice(format!("data: {chunk}\n\n").as_bytes());
        }
        if let Ok(message) = decode_and_fold_anything(&[&stream]) {
            prop_assert_eq!(&message["role"], "assistant");
        }
        let mut fold = Fold::new();
        for chunk in &chunks {
            let _ = fold.push_value(chunk, &mut |_| {});
        }
        prop_assert_eq!(&fold.finish(SendReasoning::Never, &mut |_| {}).transcript_message()["role"], "assistant");
    }
}

#[test]
fn the_sample_stream_folds_to_the_expected_message() {
    let (events, message) = decode_and_fold(&[&sample_stream()]);
    assert_eq!(
        message,
        json!({
            "role": "assistant",
            "content": "Grüße, 世界 🌍",
            "reasoning_content": "pensée → ok",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{\"p\": 1}"}},
                {"id": "b", "type": "function", "function": {"name": "bash", "arguments": "{}"}},
            ],
        })
    );
    assert_eq!(events.len(), 7, "{events:?}");
}

#[test]
fn a_call_can_be_spawned_and_the_client_shared() {
    fn assert_send<T: Send>(_: &T) {}
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<LlmClient>();
    assert_send_sync::<LlmConfig>();
    let client = LlmClient::new();
    let config = LlmConfig::default();
    let request = ChatRequest::default();
    let (events, _received) = mpsc::unbounded_channel();
    let cancel = CancelToken::new();
    let call = client.stream_chat(&config, &request, &events, &cancel);
    assert_send(&call);
}
