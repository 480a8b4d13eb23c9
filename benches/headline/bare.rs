//! The fake model's own speed: its scripted replies fetched by a bare HTTP client (reqwest, the
//! stack oml's model client uses) that only counts the `data:` lines. What oml adds is measured
//! against this.
//!
//! It knows HTTP and the event-stream framing, not oml.

use std::time::{Duration, Instant};

/// Fetch the next `requests` replies of the fake model at `base_url`, one after the other;
/// returns the `data:` lines counted and the time from the first request to the last body's end.
pub fn fetch(base_url: &str, requests: usize) -> (usize, Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = reqwest::Client::new();
        let start = Instant::now();
        let mut count = 0;
        for _ in 0..requests {
            count += one(&client, base_url).await;
        }
        (count, start.elapsed())
    })
}

/// Fetch the next reply of the fake model at `base_url`; returns its `data:` lines, the time to
/// the first of them (the model's own first token) and the time to the body's end.
pub fn first_and_all(base_url: &str) -> (usize, Duration, Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = reqwest::Client::new();
        let start = Instant::now();
        let mut first = None;
        let count = read(&client, base_url, &mut || {
            first.get_or_insert_with(|| start.elapsed());
        })
        .await;
        (count, first.unwrap_or_default(), start.elapsed())
    })
}

/// One streamed reply, read to its end; its `data:` lines.
async fn one(client: &reqwest::Client, base_url: &str) -> usize {
    read(client, base_url, &mut || {}).await
}

/// One streamed reply, read to its end, calling `on_data` at each `data:` line; their count.
async fn read(client: &reqwest::Client, base_url: &str, on_data: &mut dyn FnMut()) -> usize {
    let mut resp = client
        .post(format!("{base_url}/chat/completions"))
        .body(r#"{"model":"m","messages":[],"stream":true}"#)
        .header("content-type", "application/json")
        .send()
        .await
        .expect("the fake answers");
    let mut count = 0;
    let mut tail = Vec::new();
    while let Some(chunk) = resp.chunk().await.expect("body") {
        tail.extend_from_slice(&chunk);
        let mut start_of_line = 0;
        for (i, b) in tail.iter().enumerate() {
            if *b == b'\n' {
                if tail[start_of_line..i].starts_with(b"data:") {
                    count += 1;
                    on_data();
                }
                start_of_line = i + 1;
            }
        }
        tail.drain(..start_of_line);
    }
    count
}
