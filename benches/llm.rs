//! Throughput of the pure half of the model client: SSE decoding plus chunk folding, on one
//! core, in deltas per second and bytes per second.
//!
//! Run with `cargo bench --bench llm -j 1`. The stream is 10 000 text deltas shaped like
//! OpenAI's (about 230 bytes of JSON each, with id, model, fingerprint and `logprobs`), fed in
//! 16 KiB reads; variants use minimal chunks, one read per event, and the on-chunk path that
//! parses every chunk into a `serde_json::Value` first.

use divan::counter::{BytesCount, ItemsCount};
use divan::{Bencher, black_box};
use oml::llm::fold::Fold;
use oml::llm::sse::SseDecoder;
use oml::llm::{SendReasoning, StreamEvent};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

const DELTAS: usize = 10_000;
const READ_BYTES: usize = 16 * 1024;

/// `DELTAS` content chunks shaped like OpenAI's, a finish chunk, a usage chunk and `[DONE]`.
fn openai_stream() -> Vec<u8> {
    let mut bytes = Vec::new();
    for i in 0..DELTAS {
        let chunk = json!({
            "id": "chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012",
            "object": "chat.completion.chunk",
            "created": 1_730_000_000,
            "model": "gpt-4o-mini-2024-07-18",
            "system_fingerprint": "fp_0123456789",
            "choices": [{"index": 0, "delta": {"content": format!(" word{}", i % 97)},
                         "logprobs": null, "finish_reason": null}],
            "usage": null,
        });
        bytes.extend_from_slice(format!("data: {chunk}\n\n").as_bytes());
    }
    finish(&mut bytes);
    bytes
}

/// `DELTAS` minimal content chunks.
fn minimal_stream() -> Vec<u8> {
    let mut bytes = Vec::new();
    for i in 0..DELTAS {
        let chunk = json!({"choices": [{"delta": {"content": format!(" w{}", i % 97)}}]});
        bytes.extend_from_slice(format!("data: {chunk}\n\n").as_bytes());
    }
    finish(&mut bytes);
    bytes
}

fn finish(bytes: &mut Vec<u8>) {
    bytes.extend_from_slice(b"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
    bytes.extend_from_slice(
        b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n",
    );
    bytes.extend_from_slice(b"data: [DONE]\n\n");
}

/// Decode and fold `stream` in reads of `read` bytes (or one read per event when `read` is 0);
/// with `as_value`, parse each payload into a `Value` first, as the on-chunk path does.
fn decode_and_fold(stream: &[u8], read: usize, as_value: bool) -> usize {
    let mut decoder = SseDecoder::new();
    let mut fold = Fold::new();
    let mut deltas = 0usize;
    let mut emit = |event: StreamEvent| {
        if matches!(event, StreamEvent::TextDelta(_)) {
            deltas += 1;
        }
        black_box(event);
    };
    let reads: Box<dyn Iterator<Item = &[u8]>> = if read == 0 {
        Box::new(stream.split_inclusive(|&byte| byte == b'\n'))
    } else {
        Box::new(stream.chunks(read))
    };
    for piece in reads {
        decoder.push(piece);
        while let Some(payload) = decoder.next_payload().expect("short lines") {
            if as_value {
                let value: Value = serde_json::from_str(&payload).expect("valid JSON");
                fold.push_value(&value, &mut emit).expect("valid chunk");
            } else {
                fold.push_json(&payload, &mut emit).expect("valid chunk");
            }
        }
    }
    let outcome = fold.finish(SendReasoning::Never, &mut emit);
    black_box(outcome);
    deltas
}

#[divan::bench(args = ["openai 16KiB reads", "openai one read per line", "minimal 16KiB reads", "openai via Value (on-chunk set)"])]
fn decode_and_fold_10k_deltas(bencher: Bencher, case: &str) {
    let (stream, read, as_value) = match case {
        "openai 16KiB reads" => (openai_stream(), READ_BYTES, false),
        "openai one read per line" => (openai_stream(), 0, false),
        "minimal 16KiB reads" => (minimal_stream(), READ_BYTES, false),
        _ => (openai_stream(), READ_BYTES, true),
    };
    bencher
        .counter(ItemsCount::new(DELTAS))
        .counter(BytesCount::new(stream.len()))
        .bench(|| {
            let deltas = decode_and_fold(black_box(&stream), read, as_value);
            assert_eq!(deltas, DELTAS);
        });
}

#[divan::bench]
fn sse_decode_only_10k_events(bencher: Bencher) {
    let stream = openai_stream();
    bencher
        .counter(ItemsCount::new(DELTAS))
        .counter(BytesCount::new(stream.len()))
        .bench(|| {
            let mut decoder = SseDecoder::new();
            let mut payloads = 0usize;
            for piece in black_box(&stream).chunks(READ_BYTES) {
                decoder.push(piece);
                while let Some(payload) = decoder.next_payload().expect("short lines") {
                    black_box(&payload);
                    payloads += 1;
                }
            }
            payloads
        });
}
