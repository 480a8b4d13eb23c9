//! The model client's Lisp face (`src/bind/llm.rs`): the `llm.*` settings and `llm.chat`,
//! in-process against the fake OpenAI-compatible server over real TCP, and through the real
//! `oml eval` binary for the environment defaults and start-up.

mod support;

use std::sync::Arc;
use std::time::Duration;

use oml::bind::llm;
use oml::cancel::CancelToken;
use oml::lisp::{Lisp, LispError, LispOptions, Output as LispOutput, from_lua};
use oml::llm::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_RETRIES, DEFAULT_RETRY_BASE_DELAY,
    DEFAULT_RETRY_MAX_DELAY, Provider, SendReasoning,
};
use serde_json::{Value, json};
use support::fake_model::{
    FakeModel, Reply, Step, delta_chunk, reasoning_chunks, text_chunks, tool_call_chunks,
    usage_chunk,
};
use support::home::{Env, Run};

/// Far more than any call here needs; only a hang would reach it.
const PATIENCE: Duration = Duration::from_secs(60);

// --- helpers

/// A host with the `llm` binding, pointed at `fake` with the environment's defaults overridden,
/// so that the tests do not depend on the `OPENAI_*` variables of whoever runs them.
fn host(fake: &FakeModel) -> Lisp {
    let lisp = Lisp::new(LispOptions {
        output: LispOutput::Stderr,
        cache_dir: None,
    })
    .expect("the Lisp host starts");
    llm::install(&lisp).expect("the llm binding installs");
    for (name, value) in [
        ("llm.base-url", json!(fake.base_url())),
        ("llm.model", json!("fake/model")),
        ("llm.retry-base-delay", json!(0.01)),
        ("llm.idle-timeout", json!(30)),
    ] {
        lisp.set_setting(name, &value).expect("setq");
    }
    lisp.eval_sync("(set llm.api-key nil)");
    lisp
}

trait EvalSync {
    fn eval_sync(&self, src: &str);
}

impl EvalSync for Lisp {
    /// Run a form that does not wait.
    fn eval_sync(&self, src: &str) {
        self.compile(src, "test")
            .expect("compiles")
            .call::<()>(())
            .expect("runs");
    }
}

/// Evaluate `src` in a coroutine (as every evaluation runs) and convert its value to JSON.
async fn eval(lisp: &Lisp, src: &str) -> Result<Value, LispError> {
    eval_with(lisp, src, &CancelToken::new()).await
}

async fn eval_with(lisp: &Lisp, src: &str, cancel: &CancelToken) -> Result<Value, LispError> {
    let f = lisp.compile(src, "test")?;
    let run = lisp.run::<mlua::Value>(f, (), cancel);
    let value = tokio::time::timeout(PATIENCE, run)
        .await
        .expect("the evaluation finishes")?;
    Ok(from_lua(lisp.lua(), value)?)
}

/// A call to `llm.chat` with REQUEST that collects the events: `{:events [...] :result {...}}`.
fn collecting(request: &str) -> String {
    format!(
        "(local events [])
         (local result (llm.chat {request} {{:on-event (fn [e] (table.insert events e))}}))
         {{:events events :result result}}"
    )
}

const HI: &str = r#"{:messages [{:role :user :content "hi"}]}"#;

/// The error a failed evaluation raised, as text.
fn error_text(result: Result<Value, LispError>) -> String {
    match result {
        Ok(value) => panic!("expected an error, got {value}"),
        Err(error) => error.to_string(),
    }
}

// --- llm.chat

#[tokio::test]
async fn chat_streams_text_events_and_returns_the_message() {
    let fake = FakeModel::start([{
        let mut steps = text_chunks(&["Hel", "lo"]);
        steps.push(usage_chunk(3, 2));
        steps
    }]);
    let lisp = host(&fake);
    let got = eval(&lisp, &collecting(HI))
        .await
        .expect("the call succeeds");
    let usage = json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5});
    assert_eq!(
        got["events"],
        json!([
            {"type": "text-delta", "text": "Hel"},
            {"type": "text-delta", "text": "lo"},
            {"type": "done", "finish-reason": "stop", "usage": usage},
        ])
    );
    assert_eq!(
        got["result"],
        json!({
            "message": {"role": "assistant", "content": "Hello"},
            "text": "Hello",
            "reasoning": "",
            "tool-calls": [],
            "cancelled": false,
            "finish-reason": "stop",
            "usage": usage,
        })
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.body["model"], "fake/model");
    assert_eq!(
        sent.body["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
    assert!(sent.body.get("tools").is_none(), "{}", sent.body);
    assert_eq!(sent.header("authorization"), None, "no key, no header");
}

/// Two tool calls in one reply that a provider gave one id: the outcome's message and
/// `tool-calls` carry each call's own arguments, as its `tool-call` event did (the outcome reuses
/// the events' Lisp strings by the calls' order, checking the id).
#[tokio::test]
async fn two_calls_with_one_id_keep_their_own_arguments() {
    let call = |index: u64, args: &str| {
        Step::Chunk(delta_chunk(
            json!({"tool_calls": [{"index": index, "id": "dup", "type": "function",
                                   "function": {"name": "read", "arguments": args}}]}),
            None,
        ))
    };
    let fake = FakeModel::start([vec![
        call(0, r#"{"path": "a"}"#),
        call(1, r#"{"path": "b"}"#),
        Step::Chunk(delta_chunk(json!({}), Some("tool_calls"))),
    ]]);
    let lisp = host(&fake);
    let src = r#"
      (local events [])
      (local r (llm.chat {:messages [{:role :user :content "read both"}]}
                         {:on-event (fn [e] (when (= e.type :tool-call) (table.insert events e.arguments)))}))
      {: events
       :wire (icollect [_ c (ipairs r.message.tool_calls)] c.function.arguments)
       :calls (icollect [_ c (ipairs r.tool-calls)] c.arguments)}"#;
    let got = eval(&lisp, src).await.expect("the call succeeds");
    let both = json!([r#"{"path": "a"}"#, r#"{"path": "b"}"#]);
    assert_eq!(got["events"], both);
    assert_eq!(got["wire"], both);
    assert_eq!(got["calls"], both);
}

#[tokio::test]
async fn tool_calls_come_back_and_a_null_content_round_trips() {
    let fake = FakeModel::start([
        tool_call_chunks("call_7", "read", &[r#"{"path":"#, r#" "a.txt"}"#]),
        text_chunks(&["done"]),
    ]);
    let lisp = host(&fake);
    let src = r#"
      (local tools [{:name "read" :description "Read a file."
                     :parameters {:type "object" :properties {:path {:type "string"}}}}
                    {:type "function" :function {:name "ls"}}])
      (local messages [{:role :user :content "read a.txt"}])
      (local events [])
      (local first (llm.chat {: messages : tools} {:on-event (fn [e] (table.insert events e))}))
      (table.insert messages first.message)
      (table.insert messages {:role :tool :tool_call_id (. first.tool-calls 1 :id) :content "A"})
      (local second (llm.chat {: messages : tools}))
      {: events : first :content-is-null (= first.message.content json.null) :second second.text}"#;
    let got = eval(&lisp, src).await.expect("both calls succeed");
    let call = json!({"id": "call_7", "type": "function",
                      "function": {"name": "read", "arguments": r#"{"path": "a.txt"}"#}});
    assert_eq!(
        got["events"],
        json!([
            {"type": "tool-call", "id": "call_7", "name": "read", "arguments": r#"{"path": "a.txt"}"#},
            {"type": "done", "finish-reason": "tool_calls"},
        ])
    );
    assert_eq!(
        got["first"]["message"],
        json!({"role": "assistant", "content": null, "tool_calls": [call]})
    );
    assert_eq!(
        got["first"]["tool-calls"],
        json!([{"id": "call_7", "name": "read", "arguments": r#"{"path": "a.txt"}"#}])
    );
    assert_eq!(
        got["content-is-null"], true,
        "null content is json.null in Lisp"
    );
    assert_eq!(got["second"], "done");

    let requests = fake.requests();
    assert_eq!(
        requests[0].body["tools"],
        json!([
            {"type": "function", "function": {"name": "read", "description": "Read a file.",
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
            {"type": "function", "function": {"name": "ls", "description": "",
             "parameters": {"type": "object", "properties": {}}}},
        ])
    );
    assert_eq!(
        requests[1].body["messages"],
        json!([
            {"role": "user", "content": "read a.txt"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_7", "content": "A"},
        ])
    );
}

#[tokio::test]
async fn a_setq_between_two_calls_changes_the_next_request() {
    let fake = FakeModel::start([text_chunks(&["one"]), text_chunks(&["two"])]);
    let lisp = host(&fake);
    let other_base = fake.base_url().replace("/v1", "/gateway/api/");
    let src = format!(
        r#"(local first (llm.chat {HI}))
           (setq llm.model "other/model" llm.base-url "{other_base}" llm.api-key "sk-test")
           (local second (llm.chat {HI}))
           [first.text second.text]"#
    );
    let got = eval(&lisp, &src).await.expect("both calls succeed");
    assert_eq!(got, json!(["one", "two"]));
    let requests = fake.requests();
    let seen: Vec<(&str, &Value, Option<&str>)> = requests
        .iter()
        .map(|r| (r.path.as_str(), &r.body["model"], r.header("authorization")))
        .collect();
    assert_eq!(
        seen,
        [
            ("/v1/chat/completions", &json!("fake/model"), None),
            (
                "/gateway/api/chat/completions",
                &json!("other/model"),
                Some("Bearer sk-test")
            ),
        ]
    );
}

#[tokio::test]
async fn the_request_model_overrides_the_setting_and_extra_body_reaches_the_body() {
    let fake = FakeModel::start([text_chunks(&["ok"])]);
    let lisp = host(&fake);
    let src = r#"
      (setq llm.extra-body {:temperature 0.25 :max_tokens 64 :reasoning {:effort "high"}
                            :stream false})
      (llm.chat {:messages [{:role :user :content "hi"}] :model "override/model"})
      nil"#;
    eval(&lisp, src).await.expect("the call succeeds");
    let body = &fake.requests()[0].body;
    assert_eq!(body["model"], "override/model");
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(body["max_tokens"], 64);
    assert_eq!(body["reasoning"], json!({"effort": "high"}));
    assert_eq!(
        body["stream"], true,
        "extra-body cannot replace the client's fields"
    );
}

/// Three calls in one conversation, as the agent makes them: a plain answer, then reasoning
/// (`thought`, the delta fields of the provider) and a tool call, then the answer after the
/// tool's result. Returns the messages of the third request: user, assistant (no reasoning),
/// user, assistant (reasoning and a tool call), tool.
async fn third_request_messages(provider: &str, thought: Vec<Step>) -> Vec<Value> {
    let mut tool_turn = thought;
    tool_turn.extend(tool_call_chunks("call_1", "ls", &["{}"]));
    let fake = FakeModel::start([text_chunks(&["Hi."]), tool_turn, text_chunks(&["Done."])]);
    let lisp = host(&fake);
    let src = format!(
        r#"(setq llm.provider :{provider})
           (local tools [{{:name :ls :description "List files."}}])
           (local msgs [{{:role :user :content "hi"}}])
           (table.insert msgs (. (llm.chat {{:messages msgs :tools tools}}) :message))
           (table.insert msgs {{:role :user :content "look"}})
           (local reply (llm.chat {{:messages msgs :tools tools}}))
           (table.insert msgs reply.message)
           (each [_ call (ipairs reply.tool-calls)]
             (table.insert msgs {{:role :tool :tool_call_id call.id :content "a.txt"}}))
           (llm.chat {{:messages msgs :tools tools}})
           nil"#
    );
    eval(&lisp, &src).await.expect("the calls succeed");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3, "{provider}");
    requests[2].body["messages"]
        .as_array()
        .expect("messages")
        .clone()
}

/// The reasoning fields of a message, as `(key, value)`.
fn reasoning_fields(message: &Value) -> Vec<(String, Value)> {
    ["reasoning_content", "reasoning", "reasoning_details"]
        .into_iter()
        .filter_map(|key| message.get(key).map(|v| (key.to_owned(), v.clone())))
        .collect()
}

#[tokio::test]
async fn each_provider_gets_the_reasoning_of_earlier_turns_its_own_way() {
    let field = |value: Value| vec![("reasoning_content".to_owned(), value)];
    let cases = [
        ("deepseek", field(json!("")), field(json!("think"))),
        ("moonshot", field(json!("")), field(json!("think"))),
        ("dashscope", vec![], field(json!("think"))),
        ("generic", vec![], vec![]),
    ];
    for (provider, plain, tool_turn) in cases {
        let thought = reasoning_chunks("reasoning_content", &["thi", "nk"]);
        let messages = third_request_messages(provider, thought).await;
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant", "tool"]);
        assert_eq!(
            reasoning_fields(&messages[1]),
            plain,
            "{provider}: plain answer"
        );
        assert_eq!(
            reasoning_fields(&messages[3]),
            tool_turn,
            "{provider}: tool turn"
        );
        assert_eq!(messages[3]["tool_calls"][0]["id"], "call_1", "{provider}");
    }
}

#[tokio::test]
async fn openrouter_gets_its_reasoning_details_back_unmodified() {
    let items = [
        json!({"type": "reasoning.text", "text": "Let me ", "format": "anthropic-claude-v1", "index": 0}),
        json!({"type": "reasoning.text", "text": "look.", "signature": "sig", "format": "anthropic-claude-v1", "index": 0}),
        json!({"type": "reasoning.encrypted", "data": "opaque==", "id": "rs_1", "format": "openai-responses-v1", "index": 1}),
    ];
    let thought = vec![
        Step::Chunk(delta_chunk(
            json!({"reasoning": "Let me ", "reasoning_details": [items[0]]}),
            None,
        )),
        Step::Chunk(delta_chunk(
            json!({"reasoning": "look.", "reasoning_details": [items[1], items[2]]}),
            None,
        )),
    ];
    let messages = third_request_messages("openrouter", thought).await;
    assert_eq!(
        reasoning_fields(&messages[1]),
        vec![],
        "no reasoning, nothing sent"
    );
    assert_eq!(
        reasoning_fields(&messages[3]),
        vec![("reasoning_details".to_owned(), json!(items))],
        "the items as they streamed, and neither the text nor reasoning_content"
    );
}

#[tokio::test]
async fn on_chunk_sees_raw_provider_fields_and_its_errors_do_not_stop_the_stream() {
    let mut steps = reasoning_chunks("reasoning_content", &["think", "ing"]);
    steps.extend(text_chunks(&["an", "swer"]));
    let fake = FakeModel::start([steps]);
    let lisp = host(&fake);
    let src = r#"
      (local raw [])
      (local events [])
      (setq llm.on-chunk
            (fn [chunk]
              (let [delta (. chunk :choices 1 :delta)]
                (table.insert raw (or delta.reasoning_content delta.content "-"))
                (when (= delta.content "an") (error "on-chunk fails")))))
      (local result (llm.chat {:messages [{:role :user :content "hi"}]}
                              {:on-event (fn [e] (table.insert events e.type))}))
      {: raw : events :text result.text :reasoning result.reasoning}"#;
    let got = eval(&lisp, src).await.expect("the call succeeds");
    assert_eq!(got["raw"], json!(["think", "ing", "an", "swer", "-"]));
    assert_eq!(
        got["events"],
        json!([
            "thought-delta",
            "thought-delta",
            "text-delta",
            "text-delta",
            "done"
        ])
    );
    assert_eq!(got["text"], "answer");
    assert_eq!(got["reasoning"], "thinking");
}

#[tokio::test]
async fn on_chunk_is_looked_up_on_every_chunk() {
    let fake = FakeModel::start([text_chunks(&["a", "b", "c"])]);
    let lisp = host(&fake);
    // The first hook replaces itself; the replacement sees the rest of the same stream.
    let src = r#"
      (local seen [])
      (fn llm.on-chunk [chunk]
        (table.insert seen (.. "first:" (. chunk :choices 1 :delta :content)))
        (set llm.on-chunk (fn [chunk]
                            (table.insert seen (.. "second:" (or (. chunk :choices 1 :delta :content) "end"))))))
      (llm.chat {:messages [{:role :user :content "hi"}]})
      seen"#;
    let got = eval(&lisp, src).await.expect("the call succeeds");
    assert_eq!(
        got,
        json!(["first:a", "second:b", "second:c", "second:end"])
    );
}

#[tokio::test]
async fn on_event_runs_in_the_callers_coroutine_and_may_wait() {
    let fake = FakeModel::start([text_chunks(&["x", "y"])]);
    let lisp = host(&fake);
    let src = r#"
      (local me (coroutine.running))
      (local seen [])
      (llm.chat {:messages [{:role :user :content "hi"}]}
                {:on-event (fn [e]
                             ;; The scenario: a handler that waits (yields) in the call.
                             (oml.sleep 1)
                             (table.insert seen (= me (coroutine.running))))})
      seen"#;
    let got = eval(&lisp, src).await.expect("the call succeeds");
    assert_eq!(got, json!([true, true, true]));
}

#[tokio::test]
async fn an_error_in_on_event_stops_the_call_and_propagates() {
    // The reply hangs after its first chunk: only closing the call ends it promptly.
    let fake = FakeModel::start([vec![
        Step::Chunk(delta_chunk(json!({"content": "partial"}), None)),
        Step::Hang,
    ]]);
    let lisp = host(&fake);
    let src = r#"
      (let [(ok e) (pcall llm.chat {:messages [{:role :user :content "hi"}]}
                          {:on-event (fn [e] (error {:mine e.text}))})]
        [ok e])"#;
    let got = eval(&lisp, src).await.expect("pcall returns");
    assert_eq!(got, json!([false, {"mine": "partial"}]));
}

#[tokio::test]
async fn failures_raise_error_tables_whose_text_is_the_message() {
    let fake = FakeModel::start([
        Reply::error(400, r#"{"error":{"message":"bad model"}}"#),
        vec![
            Step::Chunk(delta_chunk(json!({"content": "so far"}), None)),
            Step::Drop,
        ]
        .into(),
    ]);
    let lisp = host(&fake);
    let src = r#"
      (fn try [] (let [(ok e) (pcall llm.chat {:messages [{:role :user :content "hi"}]})]
                   {: ok :kind e.kind :status e.status :body e.body :text (tostring e)
                    :partial (?. e :partial :text)}))
      [(try) (try)]"#;
    let got = eval(&lisp, src).await.expect("pcall returns");
    assert_eq!(
        got[0],
        json!({"ok": false, "kind": "http", "status": 400, "body": r#"{"error":{"message":"bad model"}}"#,
               "text": "Model request failed: HTTP 400: bad model"})
    );
    assert_eq!(got[1]["kind"], "stream-broken");
    assert_eq!(got[1]["partial"], "so far", "the partial reply is kept");
    assert!(
        got[1]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("the model stream broke off")),
        "{}",
        got[1]
    );

    // Uncaught, the message is what the evaluation reports.
    let fake = FakeModel::start([Reply::error(401, "no key")]);
    let lisp = host(&fake);
    let text = error_text(eval(&lisp, &format!("(llm.chat {HI})")).await);
    assert!(
        text.contains("Model request failed: HTTP 401: no key"),
        "{text}"
    );
}

#[tokio::test]
async fn retries_are_reported_as_events() {
    let fake = FakeModel::start([Reply::error(503, "busy"), text_chunks(&["ok"]).into()]);
    let lisp = host(&fake);
    let got = eval(&lisp, &collecting(HI))
        .await
        .expect("the retry succeeds");
    let retry = &got["events"][0];
    assert_eq!(retry["type"], "retry");
    assert_eq!(retry["attempt"], 1);
    assert!(retry["delay"].as_f64().is_some_and(|d| d > 0.0), "{retry}");
    assert_eq!(retry["reason"], "HTTP 503: busy");
    assert_eq!(got["result"]["text"], "ok");
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn without_a_model_the_call_fails_saying_how_to_set_one() {
    let fake = FakeModel::start(Vec::<Reply>::new());
    let lisp = host(&fake);
    lisp.eval_sync("(setq llm.model nil)");
    let text = error_text(eval(&lisp, &format!("(llm.chat {HI})")).await);
    assert!(text.contains("OPENAI_MODEL"), "{text}");
    assert!(text.contains(r#"(setq llm.model "...")"#), "{text}");
    assert!(fake.requests().is_empty());
    // An empty model counts as none.
    lisp.eval_sync(r#"(setq llm.model "")"#);
    let got = eval(
        &lisp,
        &format!("(let [(_ e) (pcall llm.chat {HI})] e.kind)"),
    )
    .await;
    assert_eq!(got.expect("pcall returns"), "no-model");
}

#[tokio::test]
async fn a_cancel_lookup_makes_the_call_return_cancelled_with_the_text_so_far() {
    let fake = FakeModel::start([vec![
        Step::Chunk(delta_chunk(json!({"content": "part"}), None)),
        Step::Hang,
    ]]);
    let lisp = host(&fake);
    let token = CancelToken::new();
    let for_lookup = token.clone();
    llm::set_cancel_lookup(&lisp, Arc::new(move |_| Some(for_lookup.clone())));
    let to_cancel = token.clone();
    let cancel = lisp
        .lua()
        .create_function(move |_, ()| {
            to_cancel.cancel();
            Ok(())
        })
        .expect("a host function");
    lisp.lua()
        .globals()
        .set("cancel-now", cancel)
        .expect("set a global");
    let src = r#"
      (local r (llm.chat {:messages [{:role :user :content "hi"}]}
                         {:on-event (fn [e] (when (= e.type :text-delta) (_G.cancel-now)))}))
      [r.cancelled r.text r.message.content (= nil r.finish-reason)]"#;
    let got = eval(&lisp, src).await.expect("the call returns");
    assert_eq!(got, json!([true, "part", "part", true]));
}

#[tokio::test]
async fn interrupting_the_evaluation_stops_a_waiting_call() {
    let fake = FakeModel::start([vec![Step::Hang]]);
    let lisp = host(&fake);
    let interrupt = CancelToken::new();
    // Interrupt once the request has reached the server, which then never answers.
    let once_waiting = async {
        fake.requests_arrived(1, PATIENCE).await;
        interrupt.cancel();
    };
    let src = format!("(llm.chat {HI})");
    let (result, ()) = tokio::join!(eval_with(&lisp, &src, &interrupt), once_waiting);
    assert!(matches!(result, Err(LispError::Interrupted)), "{result:?}");
}

#[tokio::test]
async fn bad_arguments_are_errors_that_say_what_is_wrong() {
    let fake = FakeModel::start(Vec::<Reply>::new());
    let lisp = host(&fake);
    let cases = [
        ("(llm.chat 5)", "the request must be a table"),
        ("(llm.chat {})", "the request needs :messages"),
        ("(llm.chat {:messages \"hi\"})", ":messages must be a list"),
        (
            "(llm.chat {:messages [] :model 3})",
            ":model must be a string",
        ),
        (
            "(llm.chat {:messages [] :tools [{:description \"x\"}]})",
            "every tool needs a :name",
        ),
        (
            "(llm.chat {:messages [] :tools [{:name \"x\" :parameters \"y\"}]})",
            "parameters of tool x",
        ),
        ("(llm.chat {:messages []} 7)", "the options must be a table"),
        (
            "(llm.chat {:messages []} {:on-event 7})",
            ":on-event must be a function",
        ),
    ];
    for (src, expected) in cases {
        let text = error_text(eval(&lisp, src).await);
        assert!(text.contains("llm.chat: "), "{src}: {text}");
        assert!(text.contains(expected), "{src}: {text}");
    }
    assert!(fake.requests().is_empty());
}

// --- settings and config()

#[tokio::test]
async fn config_reads_every_setting_at_call_time() {
    let fake = FakeModel::start(Vec::<Reply>::new());
    let lisp = host(&fake);
    let config = llm::config(&lisp).expect("the defaults make a config");
    assert_eq!(config.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
    assert_eq!(config.idle_timeout, Duration::from_secs(30));
    assert_eq!(config.max_retries, DEFAULT_MAX_RETRIES);
    assert_eq!(config.retry_base_delay, Duration::from_millis(10));
    assert_eq!(config.retry_max_delay, DEFAULT_RETRY_MAX_DELAY);
    assert_eq!(config.provider, None, ":auto");
    assert_eq!(config.send_reasoning, None, ":auto");
    assert_eq!(
        config.provider(),
        Provider::Generic,
        "a local URL is generic"
    );
    assert!(config.extra_body.is_empty());
    assert!(config.on_chunk.is_none(), "no hook, no observer");
    assert_eq!(config.api_key, None);

    lisp.eval_sync(
        r#"(setq llm.base-url "https://api.deepseek.com/v1" llm.api-key "" llm.model "m"
                 llm.send-reasoning :tool-turns
                 llm.extra-body {:top_p 0.5} llm.connect-timeout 2.5 llm.idle-timeout 7
                 llm.max-retries 0 llm.retry-base-delay 0 llm.retry-max-delay 1
                 llm.on-chunk (fn [] nil))"#,
    );
    let config = llm::config(&lisp).expect("a config");
    assert_eq!(config.base_url, "https://api.deepseek.com/v1");
    assert_eq!(config.provider(), Provider::DeepSeek, "from the host");
    assert_eq!(config.api_key, None, "an empty key is no key");
    assert_eq!(config.model.as_deref(), Some("m"));
    assert_eq!(config.send_reasoning, Some(SendReasoning::ToolTurns));
    assert_eq!(config.extra_body.get("top_p"), Some(&json!(0.5)));
    assert_eq!(config.connect_timeout, Duration::from_millis(2500));
    assert_eq!(config.idle_timeout, Duration::from_secs(7));
    assert_eq!(config.max_retries, 0);
    assert_eq!(config.retry_base_delay, Duration::ZERO);
    assert_eq!(config.retry_max_delay, Duration::from_secs(1));
    assert!(config.on_chunk.is_some());

    lisp.eval_sync("(setq llm.provider :openrouter llm.send-reasoning :auto)");
    let config = llm::config(&lisp).expect("a config");
    assert_eq!(
        config.provider,
        Some(Provider::OpenRouter),
        "wins over the host"
    );
    assert_eq!(config.reasoning_policy().send, SendReasoning::ToolTurns);
}

#[tokio::test]
async fn unusable_values_are_refused_by_setq_or_at_the_next_call() {
    let fake = FakeModel::start(Vec::<Reply>::new());
    let lisp = host(&fake);
    // setq checks the type.
    let cases = [
        (
            "(setq llm.model 5)",
            "llm.model expects a string or nil, got integer",
        ),
        (
            "(setq llm.base-url nil)",
            "llm.base-url expects a string, got nil",
        ),
        (
            "(setq llm.max-retries 1.5)",
            "llm.max-retries expects an integer",
        ),
        (
            "(setq llm.send-reasoning true)",
            "llm.send-reasoning expects one of \"auto\", \"never\", \"tool-turns\", \"always\"",
        ),
        (
            "(setq llm.provider :mistral)",
            "llm.provider expects one of \"auto\", \"deepseek\"",
        ),
        (
            "(setq llm.send-reasoning? true)",
            "unknown setting llm.send-reasoning?",
        ),
        (
            "(setq llm.on-chunk 3)",
            "llm.on-chunk expects a function or nil",
        ),
        (
            "(setq llm.idle-timeout \"5\")",
            "llm.idle-timeout expects a number",
        ),
    ];
    for (src, expected) in cases {
        let text = error_text(eval(&lisp, src).await);
        assert!(text.contains(expected), "{src}: {text}");
    }
    // Values of the right type that make no sense, or a `set` that bypasses setq, fail the
    // next call, naming the setting.
    let cases = [
        (
            "(setq llm.idle-timeout 0)",
            "llm.idle-timeout must be a number of seconds",
        ),
        (
            "(setq llm.connect-timeout -1)",
            "llm.connect-timeout must be a number of seconds",
        ),
        (
            "(setq llm.retry-max-delay (/ 1 0))",
            "llm.retry-max-delay must be",
        ),
        (
            "(setq llm.max-retries -1)",
            "llm.max-retries must be zero or more",
        ),
        (
            "(setq llm.extra-body [1 2])",
            "llm.extra-body must be a table of request fields",
        ),
        ("(set llm.on-chunk 3)", "llm.on-chunk"),
        ("(set llm.provider :mistral)", "llm.provider expects one of"),
        ("(set llm.model 3)", "llm.model expects a string or nil"),
    ];
    for (setting, expected) in cases {
        let lisp = host(&fake);
        lisp.eval_sync(setting);
        let text = error_text(eval(&lisp, &format!("(llm.chat {HI})")).await);
        assert!(text.contains(expected), "{setting}: {text}");
    }
    assert!(fake.requests().is_empty());
}

// --- the real binary: environment defaults, start-up, secrecy

/// `oml eval EXPR` in `env` with the extra environment variables `vars`.
fn oml_eval(env: &Env, vars: &[(&str, &str)], expr: &str) -> Run {
    env.run_with(None, vars, &["eval", expr])
}

#[test]
fn the_environment_gives_the_defaults_and_empty_means_unset() {
    let env = Env::new();
    let expr = "[llm.base-url (or llm.model :none) (= nil llm.api-key)]";
    let cases: [(&[(&str, &str)], &str); 3] = [
        (
            &[
                ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
                ("OPENAI_MODEL", "env/model"),
                ("OPENAI_API_KEY", "sk-env"),
            ],
            r#"["http://127.0.0.1:9/v1" "env/model" false]"#,
        ),
        (
            &[
                ("OPENAI_BASE_URL", ""),
                ("OPENAI_MODEL", ""),
                ("OPENAI_API_KEY", ""),
            ],
            r#"["https://api.openai.com/v1" "none" true]"#,
        ),
        (&[], r#"["https://api.openai.com/v1" "none" true]"#),
    ];
    for (vars, expected) in cases {
        let out = oml_eval(&env, vars, expr);
        assert_eq!(out.code, 0, "{vars:?}: {}", out.stderr);
        assert_eq!(out.stdout.trim(), expected, "{vars:?}");
    }
}

#[test]
fn the_other_settings_start_at_the_clients_defaults() {
    let env = Env::new();
    let out = oml_eval(
        &env,
        &[],
        "[llm.provider llm.send-reasoning llm.extra-body llm.connect-timeout llm.idle-timeout \
          llm.max-retries llm.retry-base-delay llm.retry-max-delay (= nil llm.on-chunk)]",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let expected = format!(
        "[\"auto\" \"auto\" {{}} {} {} {} {} {} true]",
        DEFAULT_CONNECT_TIMEOUT.as_secs(),
        DEFAULT_IDLE_TIMEOUT.as_secs(),
        DEFAULT_MAX_RETRIES,
        DEFAULT_RETRY_BASE_DELAY.as_secs_f64(),
        DEFAULT_RETRY_MAX_DELAY.as_secs(),
    );
    assert_eq!(out.stdout.trim(), expected);
}

#[test]
fn the_api_key_is_hidden_by_describe_and_settings() {
    let env = Env::new();
    let vars = [("OPENAI_API_KEY", "sk-very-secret")];
    let out = oml_eval(&env, &vars, "(print (describe llm.api-key)) (settings)");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let shown = out.stdout;
    assert!(!shown.contains("sk-very-secret"), "{shown}");
    assert!(shown.contains("Value: <hidden>"), "{shown}");
    assert!(shown.contains("llm.api-key = <hidden>"), "{shown}");
    assert!(
        shown.contains("Defined in src/bind/llm.rs:"),
        "doc says where it is defined: {shown}"
    );

    // The slash commands of print mode (they never call the model).
    for command in ["/settings", "/doc llm.api-key"] {
        let out = env.run_with(None, &vars, &["-p", command]);
        assert_eq!(out.code, 0, "{command}: {}", out.stderr);
        let shown = out.stdout;
        assert!(!shown.contains("sk-very-secret"), "{command}: {shown}");
        assert!(shown.contains("<hidden>"), "{command}: {shown}");
    }
}

#[test]
fn start_up_needs_no_model_but_the_first_call_does() {
    let env = Env::new();
    let out = oml_eval(&env, &[], "(+ 1 2)");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "3");

    let out = oml_eval(
        &env,
        &[],
        r#"(llm.chat {:messages [{:role :user :content "hi"}]})"#,
    );
    assert_eq!(out.code, 1);
    let text = out.stderr;
    assert!(text.contains("OPENAI_MODEL"), "{text}");
    assert!(text.contains(r#"(setq llm.model "...")"#), "{text}");
}

#[test]
fn llm_chat_from_oml_eval_against_the_fake_server() {
    let env = Env::new();
    let fake = FakeModel::start([text_chunks(&["from ", "the binary"])]);
    let base = fake.base_url();
    let vars = [
        ("OPENAI_BASE_URL", base.as_str()),
        ("OPENAI_MODEL", "env/model"),
    ];
    let out = oml_eval(
        &env,
        &vars,
        r#"(. (llm.chat {:messages [{:role :user :content "hi"}]}) :text)"#,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), r#""from the binary""#);
    assert_eq!(fake.requests()[0].body["model"], "env/model");
}
