//! The Anthropic Messages protocol (`llm.api` `:anthropic`) against a fake server over real
//! TCP that streams Anthropic's documented events: the request's shape, headers and cache
//! breakpoints, the stream folded into the one set of events, thinking sent back byte-exact,
//! retries on 529 and on an in-stream `overloaded_error`, a stream that dies, and a whole
//! `oml -p` tool turn configured by the `ANTHROPIC_*` variables alone.

mod support;

use std::time::Duration;

use oml::llm::{Api, ChatRequest, LlmConfig, LlmError, StreamEvent, ToolSpec};
use serde_json::{Value, json};
use support::anthropic::{self as a, reply, says};
use support::call::chat;
use support::fake_model::{FakeModel, Reply, Step};
use support::home::Env;

fn config(fake: &FakeModel) -> LlmConfig {
    LlmConfig {
        // The root of the server, as ANTHROPIC_BASE_URL is written.
        base_url: fake.base_url().trim_end_matches("/v1").to_owned(),
        api: Some(Api::Anthropic),
        api_key: Some("sk-ant-test".into()),
        model: Some("claude-fake".into()),
        retry_base_delay: Duration::from_millis(10),
        retry_max_delay: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(10),
        ..LlmConfig::default()
    }
}

fn request(messages: Vec<Value>) -> ChatRequest {
    ChatRequest {
        messages,
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        model: None,
    }
}

#[tokio::test]
async fn a_tool_turn_streams_as_the_chat_events_and_keeps_the_signed_thinking() {
    let fake = FakeModel::start([reply(
        vec![
            a::thinking(0, "The file first.", "c2lnbmF0dXJl"),
            a::redacted(1, "ZW5jcnlwdGVk"),
            a::text(2, &["Let me ", "look."]),
            a::tool_use(3, "toolu_01", "read", &["{\"pa", "th\": \"a.txt\"}"]),
        ],
        "tool_use",
    )]);
    let messages = vec![
        json!({"role": "system", "content": "You are oml."}),
        json!({"role": "user", "content": "what is in a.txt?"}),
    ];
    let (result, events) = chat(&config(&fake), &request(messages)).await;
    let outcome = result.expect("the call succeeds");
    assert_eq!(outcome.text, "Let me look.");
    assert_eq!(outcome.reasoning, "The file first.");
    assert_eq!(outcome.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(outcome.tool_calls.len(), 1);
    assert_eq!(outcome.tool_calls[0].id, "toolu_01");
    assert_eq!(*outcome.tool_calls[0].arguments, "{\"path\": \"a.txt\"}");
    assert_eq!(
        outcome.message["thinking_blocks"],
        json!([{"type": "thinking", "thinking": "The file first.", "signature": "c2lnbmF0dXJl"},
               {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}])
    );
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            StreamEvent::ThoughtDelta(_) => "thought",
            StreamEvent::TextDelta(_) => "text",
            StreamEvent::ToolCall(_) => "call",
            StreamEvent::Done { .. } => "done",
            StreamEvent::Retry { .. } => "retry",
        })
        .collect();
    assert_eq!(kinds, ["thought", "text", "text", "call", "done"]);

    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        sent.header("authorization"),
        None,
        "no bearer token to Anthropic"
    );
    assert_eq!(
        sent.body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(
        sent.body["tools"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(sent.body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(
        sent.body["messages"][0]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(sent.body["stream"], true);
    assert!(sent.body["max_tokens"].as_u64().is_some());
}

#[tokio::test]
async fn the_next_request_sends_the_thinking_back_byte_exact_before_the_tool_use() {
    let fake = FakeModel::start([says("It says hi.")]);
    let blocks = json!([{"type": "thinking", "thinking": "The file first.\n", "signature": "c2ln+/="},
                        {"type": "redacted_thinking", "data": "ZW5j"}]);
    let messages = vec![
        json!({"role": "user", "content": "what is in a.txt?"}),
        json!({"role": "assistant", "content": null, "thinking_blocks": blocks,
               "reasoning_content": "The file first.\n",
               "tool_calls": [{"id": "toolu_01", "type": "function",
                   "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}}]}),
        json!({"role": "tool", "tool_call_id": "toolu_01", "content": "hi"}),
    ];
    let (result, _) = chat(&config(&fake), &request(messages)).await;
    assert_eq!(result.unwrap().text, "It says hi.");
    let body = &fake.requests()[0].body;
    let assistant = &body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0], blocks[0]);
    assert_eq!(assistant["content"][1], blocks[1]);
    assert_eq!(
        assistant["content"][2],
        json!({"type": "tool_use", "id": "toolu_01", "name": "read", "input": {"path": "a.txt"}})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01",
            "content": "hi", "cache_control": {"type": "ephemeral"}}]})
    );

    // The chat protocol never sends Anthropic's blocks.
    let fake = FakeModel::start([Reply::Stream(support::fake_model::text_chunks(&["ok"]))]);
    let chat_config = LlmConfig {
        base_url: fake.base_url(),
        api: Some(Api::Chat),
        ..config(&fake)
    };
    let messages = vec![
        json!({"role": "user", "content": "q"}),
        json!({"role": "assistant", "content": "a", "thinking_blocks": blocks}),
        json!({"role": "user", "content": "q2"}),
    ];
    let (result, _) = chat(&chat_config, &request(messages)).await;
    result.unwrap();
    let sent = fake.requests()[0].body.to_string();
    assert!(
        !sent.contains("thinking_blocks") && !sent.contains("c2ln"),
        "{sent}"
    );
}

#[tokio::test]
async fn an_image_in_the_prompt_goes_as_a_base64_block_and_caching_can_be_off() {
    let fake = FakeModel::start([says("a cat")]);
    let messages = vec![json!({"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]})];
    let config = LlmConfig {
        prompt_caching: false,
        ..config(&fake)
    };
    let (result, _) = chat(&config, &request(messages)).await;
    assert_eq!(result.unwrap().text, "a cat");
    let body = &fake.requests()[0].body;
    assert_eq!(
        body["messages"][0]["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png",
            "data": "iVBORw0KGgo="}})
    );
    assert!(!body.to_string().contains("cache_control"), "{body}");
}

#[tokio::test]
async fn overloaded_529_and_an_in_stream_overloaded_error_are_retried() {
    let fake = FakeModel::start([
        Reply::Error {
            status: 529,
            body: r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
                .into(),
            retry_after: Some("0".into()),
        },
        Reply::Events(vec![
            a::start(1, 0, 0),
            a::error("overloaded_error", "Overloaded"),
        ]),
        says("made it"),
    ]);
    let (result, events) = chat(
        &config(&fake),
        &request(vec![json!({"role": "user", "content": "hi"})]),
    )
    .await;
    assert_eq!(result.expect("the third attempt succeeds").text, "made it");
    let retries = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Retry { .. }))
        .count();
    assert_eq!(retries, 2);
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn an_in_stream_error_that_is_the_requests_fault_is_not_retried() {
    let fake = FakeModel::start([
        Reply::Events(vec![
            a::start(1, 0, 0),
            a::error("invalid_request_error", "bad image"),
        ]),
        says("never asked for"),
    ]);
    let (result, events) = chat(
        &config(&fake),
        &request(vec![json!({"role": "user", "content": "hi"})]),
    )
    .await;
    let error = result.expect_err("the call fails at once");
    assert!(matches!(error, LlmError::Provider { .. }), "{error:?}");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, StreamEvent::Retry { .. }))
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn an_error_after_output_is_final_and_keeps_the_text() {
    let mut steps = vec![a::start(1, 0, 0)];
    steps.extend(a::text(0, &["partial "]));
    steps.push(a::error("api_error", "internal"));
    let fake = FakeModel::start([Reply::Events(steps)]);
    let (result, _) = chat(
        &config(&fake),
        &request(vec![json!({"role": "user", "content": "hi"})]),
    )
    .await;
    let error = result.expect_err("the call fails");
    assert!(matches!(error, LlmError::Provider { .. }), "{error:?}");
    assert_eq!(error.partial().map(|p| p.text.as_str()), Some("partial "));
    assert_eq!(fake.requests().len(), 1, "not retried after output");
}

#[tokio::test]
async fn a_stream_that_dies_before_message_stop_is_broken() {
    let mut steps = vec![a::start(1, 0, 0)];
    steps.extend(a::text(0, &["half"]));
    steps.push(Step::Drop);
    let fake = FakeModel::start([Reply::Events(steps)]);
    let config = LlmConfig {
        max_retries: 0,
        ..config(&fake)
    };
    let (result, _) = chat(
        &config,
        &request(vec![json!({"role": "user", "content": "hi"})]),
    )
    .await;
    let error = result.expect_err("a broken stream");
    assert!(matches!(error, LlmError::StreamBroken { .. }), "{error:?}");
    assert_eq!(error.partial().map(|p| p.text.as_str()), Some("half"));
}

#[tokio::test]
async fn usage_counts_cached_input_and_the_output_limit_is_a_length_stop() {
    let mut steps = vec![a::start(3, 1000, 20)];
    steps.extend(a::text(0, &["cut"]));
    steps.extend(a::end("max_tokens", 7));
    let fake = FakeModel::start([Reply::Events(steps)]);
    let (result, _) = chat(
        &config(&fake),
        &request(vec![json!({"role": "user", "content": "hi"})]),
    )
    .await;
    let outcome = result.unwrap();
    assert!(outcome.hit_length_limit());
    let usage = outcome.usage.expect("usage");
    assert_eq!(usage["prompt_tokens"], 1023);
    assert_eq!(usage["completion_tokens"], 7);
    assert_eq!(usage["cache_read_input_tokens"], 1000);
    assert_eq!(usage["cache_creation_input_tokens"], 20);
}

/// `oml -p` with only the `ANTHROPIC_*` variables set: the whole tool turn (a `bash` call and
/// its result, then the answer) goes over the Messages API, and the second request carries the
/// first reply's signed thinking and the command's result.
#[test]
fn print_mode_runs_a_tool_turn_over_the_messages_api_from_the_anthropic_variables() {
    let env = Env::new();
    let fake = FakeModel::start([
        reply(
            vec![
                a::thinking(0, "Run it.", "U0lHTkVE"),
                a::tool_use(1, "toolu_9", "bash", &["{\"command\": \"echo hi\"}"]),
            ],
            "tool_use",
        ),
        says("It printed hi."),
    ]);
    let root = fake.base_url().trim_end_matches("/v1").to_owned();
    let out = env
        .command(None, &["-p", "--mode", "yolo", "run echo hi"])
        .env("ANTHROPIC_API_KEY", "sk-ant-env")
        .env("ANTHROPIC_BASE_URL", &root)
        .env("ANTHROPIC_MODEL", "claude-fake")
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
    for sent in &requests {
        assert_eq!(sent.path, "/v1/messages");
        assert_eq!(sent.header("x-api-key"), Some("sk-ant-env"));
        assert_eq!(sent.body["model"], "claude-fake");
    }
    let second = &requests[1].body;
    let assistant = &second["messages"][1];
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "Run it.", "signature": "U0lHTkVE"})
    );
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    let result = &second["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_9");
    assert!(result["content"].to_string().contains("hi"), "{result}");
    assert!(
        second["system"][0]["text"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
}

/// Both providers' keys in the environment, as anyone with both has them, and
/// `(setq llm.api :anthropic)` in the init file: the request goes to `ANTHROPIC_BASE_URL` (not
/// OpenAI's endpoint) with the Anthropic key, and the OpenAI key is sent nowhere.
#[test]
fn a_protocol_chosen_in_llm_api_takes_its_own_key_and_url() {
    let env = Env::new();
    env.init("(setq llm.api :anthropic llm.max-retries 0)");
    let fake = FakeModel::start([says("from the messages api")]);
    let root = fake.base_url().trim_end_matches("/v1").to_owned();
    let out = env
        .command(None, &["-p", "hi"])
        .env("OPENAI_API_KEY", "sk-openai-env")
        .env("ANTHROPIC_API_KEY", "sk-ant-env")
        .env("ANTHROPIC_BASE_URL", &root)
        .env("ANTHROPIC_MODEL", "claude-fake")
        .output()
        .expect("run oml");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("from the messages api"), "{stdout}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-env"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.body["model"], "claude-fake");
    assert!(
        !format!("{:?}", sent.headers).contains("sk-openai-env"),
        "the OpenAI key reached the Anthropic endpoint: {:?}",
        sent.headers
    );
}

/// The same two keys, `:anthropic` and a base URL set in Lisp (any server): no key from the
/// environment goes there, the Anthropic one no more than the OpenAI one.
#[test]
fn a_base_url_set_in_lisp_gets_no_key_from_the_environment() {
    let env = Env::new();
    let fake = FakeModel::start([says("from a server of my own")]);
    let root = fake.base_url().trim_end_matches("/v1").to_owned();
    env.init(&format!(
        "(setq llm.api :anthropic llm.max-retries 0 llm.base-url {root:?} llm.model \"m\")"
    ));
    let out = env
        .command(None, &["-p", "hi"])
        .env("OPENAI_API_KEY", "sk-openai-env")
        .env("ANTHROPIC_API_KEY", "sk-ant-env")
        .output()
        .expect("run oml");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), None, "{:?}", sent.headers);
    assert_eq!(sent.header("authorization"), None, "{:?}", sent.headers);
}

/// `oml -p --json` over the Messages API: cached input is priced at the cache prices of
/// `llm.prices` and counted in the result, and a refusal stops the turn as `refusal`.
#[test]
fn cached_input_is_priced_and_a_refusal_is_the_stop_reason() {
    let env = Env::new();
    env.init(
        "(setq llm.prices {\"claude-fake\" {:input 3 :output 15 :cache-read 0.3 :cache-write 3.75}})",
    );
    let mut steps = vec![a::start(3, 1000, 20)];
    steps.extend(a::text(0, &["I can't help with that."]));
    steps.extend(a::end("refusal", 5));
    let fake = FakeModel::start([Reply::Events(steps)]);
    let root = fake.base_url().trim_end_matches("/v1").to_owned();
    let out = env
        .command(None, &["-p", "--json", "do something bad"])
        .env("ANTHROPIC_API_KEY", "sk-ant-env")
        .env("ANTHROPIC_BASE_URL", &root)
        .env("ANTHROPIC_MODEL", "claude-fake")
        .output()
        .expect("run oml");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: Value = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["type"] == "result")
        .unwrap_or_else(|| panic!("a result line: {stdout}"));
    assert_eq!(result["stop_reason"], "refusal", "{result}");
    assert_eq!(
        result["usage"],
        json!({"input_tokens": 1023, "output_tokens": 5,
               "cache_read_tokens": 1000, "cache_write_tokens": 20})
    );
    // (3 × 3 + 1000 × 0.3 + 20 × 3.75 + 5 × 15) per million.
    let cost = result["cost"].as_f64().expect("a cost");
    assert!((cost - 459e-6).abs() < 1e-12, "{cost}");
}

/// `/api anthropic` moves one session to the Messages API: its next prompt (`oml -p -c`) goes to
/// `/v1/messages` with the key as `x-api-key`, while `llm.api` stays as it was.
#[test]
fn the_api_command_switches_one_session() {
    let env = Env::new();
    let fake = FakeModel::start([says("hello from the messages api")]);
    let set = env.run(Some(&fake), &["-p", "/api anthropic"]);
    assert_eq!(set.code, 0, "{set:?}");
    assert!(set.stdout.contains("Protocol set to anthropic"), "{set:?}");
    let unknown = env.run(Some(&fake), &["-p", "-c", "/api carrier-pigeon"]);
    assert!(unknown.stdout.contains("Unknown protocol"), "{unknown:?}");
    let run = env.run(Some(&fake), &["-p", "-c", "hi"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("hello from the messages api"),
        "{run:?}"
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("test-key"));
}

/// A redirect to another host must not carry the key there: reqwest strips only
/// `Authorization` from a cross-host redirect, not Anthropic's `x-api-key`, so oml follows
/// redirects to the same host only. The attacker's host is a real listener that records what
/// reaches it.
#[tokio::test]
async fn a_redirect_to_another_host_does_not_carry_the_key() {
    use std::io::{Read, Write};
    let thief = std::net::TcpListener::bind("127.0.0.2:0")
        .or_else(|_| std::net::TcpListener::bind("[::1]:0"))
        .expect("a second local address");
    let thief_url = format!("http://{}/v1/messages", thief.local_addr().unwrap());
    // The thief waits a bounded time for a connection and returns what reached it.
    thief.set_nonblocking(true).unwrap();
    let stolen = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while std::time::Instant::now() < deadline {
            match thief.accept() {
                Ok((mut s, _)) => {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut buf = [0u8; 8192];
                    let n = s.read(&mut buf).unwrap_or(0);
                    let _ = s.write_all(b"HTTP/1.1 500 X\r\nContent-Length: 0\r\n\r\n");
                    return String::from_utf8_lossy(&buf[..n]).into_owned();
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        String::new()
    });
    let redirector = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", redirector.local_addr().unwrap());
    std::thread::spawn(move || {
        while let Ok((mut s, _)) = redirector.accept() {
            let mut buf = [0u8; 65536];
            let _ = s.read(&mut buf);
            let reply = format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: {thief_url}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = s.write_all(reply.as_bytes());
        }
    });
    let config = LlmConfig {
        base_url: base,
        api: Some(Api::Anthropic),
        api_key: Some("sk-ant-do-not-leak".into()),
        model: Some("claude-fake".into()),
        max_retries: 0,
        idle_timeout: Duration::from_secs(5),
        ..LlmConfig::default()
    };
    let (result, _) = chat(
        &config,
        &request(vec![json!({"role": "user", "content": "hi"})]),
    )
    .await;
    assert!(result.is_err(), "a redirect elsewhere is not followed");
    let got = stolen.join().unwrap();
    assert!(
        !got.contains("sk-ant-do-not-leak"),
        "the key reached another host: {got}"
    );
}
