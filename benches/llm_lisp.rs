//! The cost of the model client's Lisp face, per chunk and per call.
//!
//! Run with `cargo bench --bench llm_lisp -j 1`.
//!
//! - `fold_per_chunk`: folding one OpenAI-shaped text chunk (about 230 bytes of JSON) the way the
//!   client does, with `llm.on-chunk` unset (the payload is folded straight from its text) and set
//!   (the payload is parsed into a `Value`, converted to a Lisp table and handed to the hook,
//!   then folded), for an empty hook and for one that reads the delta's text.
//! - `observer_only`: just the hook call, from the `Value` to the Lisp function's return.
//! - `config_per_call`: what `llm.chat` pays at the start of every call to read the eleven
//!   settings into an `LlmConfig`.
//!
//! Measured on the shared 2-core build machine (medians): a chunk costs about 0.46 µs unset and
//! 5 µs with a hook (of which about 2.6 µs is the conversion to a Lisp table and the call);
//! reading the settings costs about 11 µs per call.

use divan::{Bencher, black_box};
use oml::bind::llm;
use oml::lisp::{Lisp, LispOptions, Output};
use oml::llm::StreamEvent;
use oml::llm::fold::Fold;
use serde_json::{Value, json};

fn main() {
    divan::main();
}

/// One content chunk shaped like OpenAI's.
fn payload() -> String {
    json!({
        "id": "chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012",
        "object": "chat.completion.chunk",
        "created": 1_730_000_000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_0123456789",
        "choices": [{"index": 0, "delta": {"content": " word"},
                     "logprobs": null, "finish_reason": null}],
        "usage": null,
    })
    .to_string()
}

/// A host with the binding, and `hook` (Fennel source, or nothing) in `llm.on-chunk`.
fn host(hook: Option<&str>) -> Lisp {
    let lisp = Lisp::new(LispOptions {
        output: Output::Stderr,
        cache_dir: None,
    })
    .expect("host");
    llm::install(&lisp).expect("binding");
    if let Some(hook) = hook {
        lisp.compile(&format!("(set llm.on-chunk {hook})"), "bench")
            .expect("compiles")
            .call::<()>(())
            .expect("runs");
    }
    lisp
}

const EMPTY_HOOK: &str = "(fn [chunk] nil)";
const READING_HOOK: &str = "(fn [chunk] (. chunk :choices 1 :delta :content))";

#[divan::bench(args = ["unset", "set, empty hook", "set, hook reads the delta"], sample_count = 500, sample_size = 100)]
fn fold_per_chunk(bencher: Bencher, case: &str) {
    let hook = match case {
        "unset" => None,
        "set, empty hook" => Some(EMPTY_HOOK),
        _ => Some(READING_HOOK),
    };
    let lisp = host(hook);
    let observer = llm::config(&lisp).expect("config").on_chunk;
    assert_eq!(observer.is_some(), hook.is_some());
    let payload = payload();
    let mut fold = Fold::new();
    let mut emit = |event: StreamEvent| {
        black_box(event);
    };
    // The same branches as the client's `fold_payload`.
    bencher.bench_local(|| match &observer {
        None => fold
            .push_json(black_box(&payload), &mut emit)
            .expect("valid chunk"),
        Some(observer) => {
            let chunk: Value = serde_json::from_str(black_box(&payload)).expect("valid JSON");
            observer(&chunk).expect("the hook succeeds");
            fold.push_value(&chunk, &mut emit).expect("valid chunk");
        }
    });
}

#[divan::bench(args = [EMPTY_HOOK, READING_HOOK], sample_count = 500, sample_size = 100)]
fn observer_only(bencher: Bencher, hook: &str) {
    let lisp = host(Some(hook));
    let observer = llm::config(&lisp)
        .expect("config")
        .on_chunk
        .expect("an observer");
    let chunk: Value = serde_json::from_str(&payload()).expect("valid JSON");
    bencher.bench_local(|| observer(black_box(&chunk)).expect("the hook succeeds"));
}

#[divan::bench(sample_count = 500, sample_size = 10)]
fn config_per_call(bencher: Bencher) {
    let lisp = host(None);
    bencher.bench_local(|| llm::config(black_box(&lisp)).expect("config"));
}
