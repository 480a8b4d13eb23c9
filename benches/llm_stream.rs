//! End-to-end measurements of the model client over loopback TCP, printed as plain text:
//!
//! 1. Latency added per delta: a server writes one chunk, then waits until the client has
//!    emitted the matching `TextDelta` before writing the next, so every sample is one delta's
//!    trip from `write` to the event channel, not a queue. The same server feeding a bare tokio
//!    socket gives the baseline (loopback plus task wake-ups); the difference is what reqwest,
//!    the SSE decoder, the fold and the channel add.
//! 2. Memory while streaming a 10 MB reply: peak resident set (`VmHWM` in `/proc/self/status`)
//!    before and after, with a consumer draining the events as a UI would.
//!
//! Run with `cargo bench --bench llm_stream -j 1`. Linux only for the memory figure.

#![allow(clippy::print_stdout, clippy::print_stderr)] // test and tool output

use std::time::{Duration, Instant};

use oml::cancel::CancelToken;
use oml::llm::{ChatRequest, LlmClient, LlmConfig, StreamEvent};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const WARMUP: usize = 200;
const SAMPLES: usize = 3_000;
/// Reply size for the memory figure.
const REPLY_BYTES: usize = 10 * 1024 * 1024;
/// Characters of content per delta in the memory run.
const DELTA_CHARS: usize = 64;

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = latency(Client::Oml).await;
        let baseline = latency(Client::RawSocket).await;
        println!("latency per delta, write -> event (µs), {SAMPLES} samples:");
        report("  oml client (reqwest+sse+fold+channel)", &client);
        report("  baseline (bare tokio socket)        ", &baseline);
        println!(
            "  added by the client: p50 {:.1} µs",
            percentile(&client, 50.0) - percentile(&baseline, 50.0)
        );
        memory().await;
    });
}

// --- latency

#[derive(Clone, Copy, PartialEq)]
enum Client {
    Oml,
    RawSocket,
}

/// Samples of write-to-event latency in microseconds.
async fn latency(kind: Client) -> Vec<f64> {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let (ack_tx, mut ack_rx) = mpsc::unbounded_channel::<Instant>();
    let total = WARMUP + SAMPLES;
    // The server runs on its own thread and runtime, like a real model server would.
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("server runtime");
        runtime.block_on(async move {
            let listener = TcpListener::from_std(listener.into_std().expect("std")).expect("tokio");
            let (mut socket, _) = listener.accept().await.expect("accept");
            socket.set_nodelay(true).expect("nodelay");
            read_request(&mut socket).await;
            socket
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
                .await
                .expect("head");
            let mut samples = Vec::with_capacity(total);
            for i in 0..total {
                let chunk = json!({
                    "id": "chatcmpl-bench", "object": "chat.completion.chunk",
                    "created": 1_730_000_000, "model": "bench",
                    "choices": [{"index": 0, "delta": {"content": format!("w{i} ")}, "finish_reason": null}],
                });
                let data = format!("data: {chunk}\n\n");
                let framed = format!("{:x}\r\n{data}\r\n", data.len());
                let written = Instant::now();
                socket.write_all(framed.as_bytes()).await.expect("write");
                let received = ack_rx.recv().await.expect("ack");
                samples.push(received.duration_since(written));
            }
            let done = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
            let framed = format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len());
            let _ = socket.write_all(framed.as_bytes()).await;
            samples
        })
    });

    match kind {
        Client::Oml => {
            let config = LlmConfig {
                base_url: format!("http://{addr}/v1"),
                model: Some("bench".into()),
                ..LlmConfig::default()
            };
            let (events, mut received) = mpsc::unbounded_channel();
            let call = tokio::spawn(async move {
                let request = ChatRequest {
                    messages: vec![json!({"role": "user", "content": "go"})],
                    ..ChatRequest::default()
                };
                LlmClient::new()
                    .stream_chat(&config, &request, &events, &CancelToken::new())
                    .await
            });
            while let Some(event) = received.recv().await {
                if let StreamEvent::TextDelta(_) = event {
                    let _ = ack_tx.send(Instant::now());
                }
            }
            call.await.expect("join").expect("the call succeeds");
        }
        Client::RawSocket => {
            let mut socket = TcpStream::connect(addr).await.expect("connect");
            socket.set_nodelay(true).expect("nodelay");
            let body = b"{}";
            let head = format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            socket.write_all(head.as_bytes()).await.expect("request");
            socket.write_all(body).await.expect("body");
            let mut buffer = vec![0u8; 64 * 1024];
            let mut seen = 0;
            while seen < total {
                let read = socket.read(&mut buffer).await.expect("read");
                if read == 0 {
                    break;
                }
                // Every delta's data ends with "\n\n\r\n" (event end, then chunk end).
                let ends = buffer[..read]
                    .windows(4)
                    .filter(|w| w == b"\n\n\r\n")
                    .count();
                for _ in 0..ends {
                    let _ = ack_tx.send(Instant::now());
                    seen += 1;
                }
            }
        }
    }
    let samples = server.join().expect("server thread");
    samples[WARMUP..]
        .iter()
        .map(|d| d.as_secs_f64() * 1e6)
        .collect()
}

async fn read_request(socket: &mut TcpStream) {
    let mut buffer = Vec::new();
    let mut piece = [0u8; 4096];
    loop {
        let read = socket.read(&mut piece).await.expect("read request");
        buffer.extend_from_slice(&piece[..read]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buffer.len() < end + 4 + length {
                let read = socket.read(&mut piece).await.expect("read body");
                if read == 0 {
                    break;
                }
                buffer.extend_from_slice(&piece[..read]);
            }
            return;
        }
        if read == 0 {
            return;
        }
    }
}

fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank]
}

fn report(name: &str, samples: &[f64]) {
    println!(
        "{name} p50 {:>6.1}  p90 {:>6.1}  p99 {:>6.1}",
        percentile(samples, 50.0),
        percentile(samples, 90.0),
        percentile(samples, 99.0)
    );
}

// --- memory

/// Stream a `REPLY_BYTES` reply through the client and print the peak RSS before and after.
async fn memory() {
    let before = vm_hwm_kib();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let deltas = REPLY_BYTES / DELTA_CHARS;
    // The server generates chunks on the fly so that it holds no copy of the reply.
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        read_request(&mut socket).await;
        socket
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
            .await
            .expect("head");
        let content = "x".repeat(DELTA_CHARS);
        let mut batch = String::new();
        for i in 0..=deltas {
            let chunk = if i < deltas {
                json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})
            } else {
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            };
            batch.push_str(&format!("data: {chunk}\n\n"));
            if batch.len() > 16 * 1024 || i == deltas {
                batch.push_str(if i == deltas { "data: [DONE]\n\n" } else { "" });
                let framed = format!("{:x}\r\n{batch}\r\n", batch.len());
                socket.write_all(framed.as_bytes()).await.expect("write");
                batch.clear();
            }
        }
        let _ = socket.write_all(b"0\r\n\r\n").await;
    });
    let config = LlmConfig {
        base_url: format!("http://{addr}/v1"),
        model: Some("bench".into()),
        ..LlmConfig::default()
    };
    let (events, mut received) = mpsc::unbounded_channel();
    let drain = tokio::spawn(async move {
        let mut bytes = 0usize;
        while let Some(event) = received.recv().await {
            if let StreamEvent::TextDelta(text) = event {
                bytes += text.len();
            }
        }
        bytes
    });
    let started = Instant::now();
    let outcome = LlmClient::new()
        .stream_chat(
            &config,
            &ChatRequest {
                messages: vec![json!({"role": "user", "content": "go"})],
                ..ChatRequest::default()
            },
            &events,
            &CancelToken::new(),
        )
        .await
        .expect("the call succeeds");
    let elapsed = started.elapsed();
    drop(events);
    let streamed = drain.await.expect("drain");
    server.await.expect("server");
    let after = vm_hwm_kib();
    println!(
        "memory: {} MB reply in {deltas} deltas ({:.0} ms, {:.0} deltas/s end to end): \
         peak RSS {} -> {} KiB (+{:.1} MB); text {} bytes, streamed {streamed} bytes",
        REPLY_BYTES / (1024 * 1024),
        elapsed.as_secs_f64() * 1e3,
        deltas as f64
            / elapsed
                .as_secs_f64()
                .max(Duration::from_micros(1).as_secs_f64()),
        before,
        after,
        after.saturating_sub(before) as f64 / 1024.0,
        outcome.text.len(),
    );
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
