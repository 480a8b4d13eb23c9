//! Part `protocols` of the headline benchmark: one streamed reply of one-character deltas in
//! each wire protocol (`llm.api` `:chat`, `:anthropic`, `:responses`, `:gemini`), delivered as
//! `session/update`s, against the fake model's own rate for the same reply in the same run; and
//! the time to the first token over the fake's own; medians of the `stream` part's runs.
//!
//! A binary without the native protocols (an older baseline) gets no figure for them.
//!
//! It knows each protocol's reply shape and how to select the protocol, not the table.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Agent, Home, cpu_time, is_update};
use crate::fake_model::{Reply, Step, text_chunks};
use crate::{Figure, Sizes, ms};

/// A protocol's reply of so many deltas.
type Shape = fn(usize) -> Reply;

/// The protocols, with the reply shape of each.
const PROTOCOLS: [(&str, Shape); 4] = [
    ("chat", chat),
    ("anthropic", anthropic),
    ("responses", responses),
    ("gemini", gemini),
];

/// A string only a binary that speaks the native protocols holds (Gemini's endpoint verb).
const NATIVE_MARK: &[u8] = b"streamGenerateContent";

/// Part `protocols`.
pub fn protocols(bin: &Path, sizes: &Sizes) -> Vec<Figure> {
    let native = std::fs::read(bin)
        .map(|bytes| bytes.windows(NATIVE_MARK.len()).any(|w| w == NATIVE_MARK))
        .unwrap_or(false);
    let mut figures = Vec::new();
    for (api, reply) in PROTOCOLS {
        let measured = (api == "chat" || native).then(|| {
            let runs: Vec<Run> = (0..sizes.stream_runs)
                .map(|_| one(bin, api, reply(sizes.deltas)))
                .collect();
            let pick = |f: fn(&Run) -> f64| median(runs.iter().map(f).collect());
            Run {
                model_rate: pick(|r| r.model_rate),
                ratio: pick(|r| r.ratio),
                first_ms: pick(|r| r.first_ms),
                cpu_us: pick(|r| r.cpu_us),
                updates: pick(|r| r.updates),
            }
        });
        let run = measured.unwrap_or(Run {
            model_rate: f64::NAN,
            ratio: f64::NAN,
            first_ms: f64::NAN,
            cpu_us: f64::NAN,
            updates: f64::NAN,
        });
        figures.push(Figure::new(name(api, 0), "x", ">= 0.8").of(run.ratio));
        figures.push(Figure::new(name(api, 1), "ms", "").of(run.first_ms));
        figures.push(Figure::new(name(api, 2), "us", "<= 2").of(run.cpu_us));
        figures.push(Figure::new(name(api, 3), "", "").of(run.updates));
        figures.push(Figure::new(name(api, 4), "/s", "").of(run.model_rate));
    }
    figures
}

/// What one reply through a protocol gave: its rate against the model's, the first token's
/// delay over the model's (ms), oml's CPU per delta (µs), and the updates that carried it.
struct Run {
    model_rate: f64,
    ratio: f64,
    first_ms: f64,
    cpu_us: f64,
    updates: f64,
}

/// The row names: a `&'static str` each, as the table wants.
fn name(api: &str, row: usize) -> &'static str {
    const DETAILS: [&str; 4] = [
        "  first token over the model's",
        "  oml's CPU per delta",
        "  updates that carried them",
        "  the fake model alone: events/s",
    ];
    const HEADS: [&str; 4] = [
        "`:chat`: deltas/s against the model's",
        "`:anthropic`: deltas/s against the model's",
        "`:responses`: deltas/s against the model's",
        "`:gemini`: deltas/s against the model's",
    ];
    let at = PROTOCOLS.iter().position(|(a, _)| *a == api).unwrap_or(0);
    match row {
        0 => HEADS[at],
        n => DETAILS[n - 1],
    }
}

/// One reply through `api`.
fn one(bin: &Path, api: &str, reply: Reply) -> Run {
    let home = Home::new();
    let fake = crate::fake_model::FakeModel::start([reply.clone(), reply]);
    let root = fake.base_url();
    let base = if api == "chat" {
        root.clone()
    } else {
        root.trim_end_matches("/v1").to_owned()
    };
    // The chat protocol is the environment's (as a baseline binary without `llm.api` runs it);
    // a native one is set in the init file.
    if api != "chat" {
        std::fs::write(
            home.root.join("config/oml/init.fnl"),
            format!("(setq llm.api :{api} llm.base-url {base:?})\n"),
        )
        .expect("write the init file");
    }
    let (events, model_first, served) = crate::bare::first_and_all(&root);
    let mut agent = Agent::spawn(&home, bin, Some(&fake));
    agent.initialize();
    let sid = agent.new_session(&home.project);
    let cpu_before = cpu_time(agent.pid());
    let start = Instant::now();
    let id = agent.prompt(&sid, "stream");
    let (mut n, mut first, mut updates) = (0usize, None::<Duration>, 0usize);
    loop {
        let line = agent.line();
        if is_update(&line) {
            if line.contains(r#""sessionUpdate":"agent_message_chunk""#) {
                first.get_or_insert_with(|| start.elapsed());
                updates += 1;
                let v: Value = serde_json::from_str(&line).expect("a JSON line");
                n += v["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .count();
            }
            continue;
        }
        let v: Value = serde_json::from_str(&line).expect("a JSON line");
        if v["id"] == json!(id) && v.get("method").is_none() {
            assert_eq!(v["result"]["stopReason"], "end_turn", "{api}: {v}");
            break;
        }
    }
    let took = start.elapsed();
    let cpu = cpu_time(agent.pid()).saturating_sub(cpu_before);
    let rate = n as f64 / took.as_secs_f64();
    let model_rate = events as f64 / served.as_secs_f64();
    let first = ms(first.unwrap_or(took)) - ms(model_first);
    let per_delta = cpu.as_secs_f64() * 1e6 / n.max(1) as f64;
    Run {
        model_rate,
        ratio: rate / model_rate,
        first_ms: first,
        cpu_us: per_delta,
        updates: updates as f64,
    }
}

fn chat(deltas: usize) -> Reply {
    Reply::from(text_chunks(&vec!["x"; deltas]))
}

fn event(kind: &str, mut fields: Value) -> Step {
    fields["type"] = json!(kind);
    Step::Chunk(fields)
}

fn anthropic(deltas: usize) -> Reply {
    let mut steps = vec![
        event(
            "message_start",
            json!({"message": {"usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ),
        event(
            "content_block_start",
            json!({"index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    let delta = event(
        "content_block_delta",
        json!({"index": 0, "delta": {"type": "text_delta", "text": "x"}}),
    );
    steps.extend(std::iter::repeat_n(delta, deltas));
    steps.push(event("content_block_stop", json!({"index": 0})));
    steps.push(event(
        "message_delta",
        json!({"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
    ));
    steps.push(event("message_stop", json!({})));
    Reply::Events(steps)
}

fn responses(deltas: usize) -> Reply {
    let mut steps = vec![event("response.created", json!({"response": {}}))];
    let delta = event(
        "response.output_text.delta",
        json!({"output_index": 0, "content_index": 0, "delta": "x"}),
    );
    steps.extend(std::iter::repeat_n(delta, deltas));
    steps.push(event(
        "response.completed",
        json!({"response": {"usage": {"input_tokens": 1, "output_tokens": 1}}}),
    ));
    Reply::Events(steps)
}

fn gemini(deltas: usize) -> Reply {
    let part = Step::Chunk(
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}}]}),
    );
    let mut steps: Vec<Step> = std::iter::repeat_n(part, deltas.saturating_sub(1)).collect();
    steps.push(Step::Chunk(json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]},
        "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1}})));
    Reply::Events(steps)
}

/// The median of `values` (the upper one of an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}
