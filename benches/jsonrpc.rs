//! Throughput of the JSON-RPC transport for typical `session/update` notification lines (about
//! 200 bytes): reading and classifying, writing through the ordered writer, and both ends over a
//! real Unix socket pair. Run with `cargo bench --bench jsonrpc -j 1`; divan prints items/s.

use divan::Bencher;
use divan::counter::{BytesCount, ItemsCount};
use oml::jsonrpc::{Connection, DEFAULT_MAX_LINE_BYTES, FrameReader, Incoming, Message, Options};
use serde_json::{Value, json};
use tokio::net::UnixStream;
use tokio::runtime::Runtime;

/// Messages per benchmark iteration.
const BATCH: usize = 1000;

fn main() {
    divan::main();
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn update_params(i: usize) -> Value {
    json!({
        "sessionId": "sess_0123456789abcdef",
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": format!("Chunk {i:05} of the answer, a few words long.")}
        }
    })
}

fn update_lines() -> Vec<u8> {
    let mut bytes = Vec::new();
    for i in 0..BATCH {
        let message =
            json!({"jsonrpc": "2.0", "method": "session/update", "params": update_params(i)});
        bytes.extend_from_slice(message.to_string().as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

/// Bytes → lines → classified messages, from memory (no I/O cost).
#[divan::bench]
fn read_and_classify(bencher: Bencher) {
    let rt = runtime();
    let input = update_lines();
    bencher
        .counter(ItemsCount::new(BATCH))
        .with_inputs(|| input.as_slice())
        .input_counter(|bytes| BytesCount::new(bytes.len()))
        .bench_local_values(|bytes| {
            rt.block_on(async {
                let mut frames = FrameReader::new(bytes, DEFAULT_MAX_LINE_BYTES);
                let mut seen = 0;
                while let Ok(Some(message)) = frames.next_message().await {
                    if matches!(message, Message::Notification(_)) {
                        seen += 1;
                    }
                }
                assert_eq!(seen, BATCH);
            })
        });
}

/// Notifications → encoded lines → the writer task → a sink, ending with a flush.
#[divan::bench]
fn write_notifications(bencher: Bencher) {
    let rt = runtime();
    let params: Vec<Value> = (0..BATCH).map(update_params).collect();
    let connection = rt.block_on(async {
        let (connection, _incoming) =
            Connection::start(tokio::io::empty(), tokio::io::sink(), Options::default());
        connection
    });
    bencher.counter(ItemsCount::new(BATCH)).bench_local(|| {
        rt.block_on(async {
            for p in &params {
                connection
                    .notify("session/update", p)
                    .await
                    .expect("notify");
            }
            connection.flush().await.expect("flush");
        })
    });
}

/// One connection's writer to another connection's reader over a Unix socket pair, until the
/// receiving owner has every notification.
#[divan::bench]
fn socket_round_trip(bencher: Bencher) {
    let rt = runtime();
    let params: Vec<Value> = (0..BATCH).map(update_params).collect();
    let (sender, mut incoming, _receiver) = rt.block_on(async {
        let (a, b) = UnixStream::pair().expect("socket pair");
        let (a_read, a_write) = a.into_split();
        let (b_read, b_write) = b.into_split();
        let (sender, _) = Connection::start(a_read, a_write, Options::default());
        let (receiver, incoming) = Connection::start(b_read, b_write, Options::default());
        (sender, incoming, receiver)
    });
    bencher.counter(ItemsCount::new(BATCH)).bench_local(|| {
        rt.block_on(async {
            let send = async {
                for p in &params {
                    sender.notify("session/update", p).await.expect("notify");
                }
            };
            let receive = async {
                for _ in 0..BATCH {
                    let message = incoming.recv().await;
                    assert!(matches!(message, Some(Incoming::Notification(_))));
                }
            };
            tokio::join!(send, receive);
        })
    });
}
