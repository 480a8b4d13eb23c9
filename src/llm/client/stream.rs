//! Reading one streamed reply: the body's chunks decoded as server-sent events and folded into
//! events and the outcome, while the cancel, the idle watchdog and the content watchdog are
//! watched (see `llm::quiet`).
//!
//! It knows the loop of one attempt, not retries, requests or what the events are for.

use super::{Call, Failure, broken, chain, fold_failure};
use crate::llm::fold::{Fold, FoldError};
use crate::llm::native::Native;
use crate::llm::quiet::Quiet;
use crate::llm::sse::SseDecoder;
use crate::llm::{ChatOutcome, LlmError, StreamEvent};

/// Reads of a streamed body between two waits that look at the cancel and the watchdogs before
/// the body: the others read the body first, so a body that is always ready costs no timer
/// poll per chunk, and the watchdogs still run while it floods (a cancel is seen at once
/// through its flag).
const WATCH_EVERY_READS: u32 = 64;

/// What ended one wait of the stream loop.
enum Woke<R> {
    Read(R),
    Cancelled,
    Idle,
    NoContent,
}

/// The watchdogs of one streamed reply.
struct Watch {
    idle: Quiet,
    content: Quiet,
    reads: u32,
}

impl Call<'_> {
    /// Decode and fold a streamed reply.
    pub(super) async fn stream(
        &self,
        mut response: reqwest::Response,
    ) -> Result<ChatOutcome, Failure> {
        let cancelled = self.cancel.cancelled();
        tokio::pin!(cancelled);
        // Watchdogs rather than timers reset per chunk (see `quiet`): a stall is reported
        // between 1 and 1.25 times its limit after the last byte (or content).
        let mut watch = Watch {
            idle: Quiet::new(self.config.idle_timeout),
            content: Quiet::new(self.config.content_timeout),
            reads: 0,
        };
        let mut content = 0;
        let mut decoder = SseDecoder::new();
        let mut fold = Fold::new();
        let mut native = Native::for_api(self.api);
        let mut emit = |event: StreamEvent| {
            // A dropped receiver only means nobody listens; the call still completes.
            let _ = self.events.send(event);
        };
        loop {
            // The flag first: a body that is always ready is read ahead of the cancel branch.
            if self.cancel.is_cancelled() {
                return Ok(fold.into_partial(true));
            }
            let read = match watch.next(&mut response, &mut cancelled).await {
                Woke::Read(read) => read,
                Woke::Cancelled => return Ok(fold.into_partial(true)),
                woke => return Err(self.stalled(&woke, fold)),
            };
            let bytes = match read {
                Ok(Some(bytes)) => bytes,
                Ok(None) => {
                    if let Some(payload) = decoder.finish()
                        && let Err(error) =
                            self.fold_payload(&mut fold, &mut native, &payload, &mut emit)
                    {
                        return Err(self.payload_failure(error, fold));
                    }
                    if decoder.is_done() || fold.finish_reason().is_some() {
                        break;
                    }
                    return Err(broken("the stream ended before [DONE]".to_owned(), fold));
                }
                Err(error) => return Err(broken(chain(&error.without_url()), fold)),
            };
            watch.idle.touch();
            decoder.push(bytes.as_ref());
            self.fold_decoded(&mut decoder, &mut fold, &mut native, &mut emit)?;
            if fold.content_len() != content {
                content = fold.content_len();
                watch.content.touch();
            }
            if decoder.is_done() || native.as_ref().is_some_and(Native::complete) {
                break;
            }
        }
        let mut outcome = fold.finish(self.config.reasoning_policy().send, &mut emit);
        if let Some(native) = native {
            native.finish(&mut outcome);
        }
        Ok(outcome)
    }

    /// The failure for a payload that could not be folded. A transient error the provider
    /// reports in a native stream before any output (Anthropic's `overloaded_error` after the
    /// 200, say) is retried like the 529 it stands for; any other, one on the chat protocol,
    /// and any after output, is final.
    fn payload_failure(&self, error: FoldError, fold: Fold) -> Failure {
        let retry = self.api != crate::llm::Api::Chat
            && !fold.has_output()
            && matches!(
                error,
                FoldError::Provider {
                    transient: true,
                    ..
                }
            );
        let error = fold_failure(error, fold);
        if retry {
            Failure::Retryable {
                error,
                retry_after: None,
            }
        } else {
            Failure::Fatal(error)
        }
    }

    /// Fold every payload `decoder` holds whole.
    fn fold_decoded(
        &self,
        decoder: &mut SseDecoder,
        fold: &mut Fold,
        native: &mut Option<Native>,
        emit: &mut impl FnMut(StreamEvent),
    ) -> Result<(), Failure> {
        loop {
            let payload = match decoder.next_payload() {
                Ok(Some(payload)) => payload,
                Ok(None) => return Ok(()),
                Err(error) => {
                    return Err(Failure::Fatal(LlmError::StreamBroken {
                        reason: error.to_string(),
                        partial: Box::new(std::mem::take(fold).into_partial(false)),
                    }));
                }
            };
            if let Err(error) = self.fold_payload(fold, native, &payload, emit) {
                return Err(self.payload_failure(error, std::mem::take(fold)));
            }
        }
    }

    /// The error of a watchdog that fired, with what arrived before.
    fn stalled<R>(&self, woke: &Woke<R>, fold: Fold) -> Failure {
        let partial = Box::new(fold.into_partial(false));
        Failure::Fatal(match woke {
            Woke::NoContent => LlmError::NoContent {
                quiet: self.config.content_timeout,
                partial,
            },
            _ => LlmError::IdleTimeout {
                idle: self.config.idle_timeout,
                partial,
            },
        })
    }
}

impl Watch {
    /// Wait for the next chunk of `response`, the cancel or a watchdog; see
    /// [`WATCH_EVERY_READS`] for the order.
    async fn next<F: Future<Output = ()>>(
        &mut self,
        response: &mut reqwest::Response,
        cancelled: &mut std::pin::Pin<&mut F>,
    ) -> Woke<reqwest::Result<Option<impl AsRef<[u8]> + use<F>>>> {
        self.reads = self.reads.wrapping_add(1);
        if self.reads.is_multiple_of(WATCH_EVERY_READS) {
            tokio::select! {
                biased;
                () = cancelled.as_mut() => Woke::Cancelled,
                () = self.idle.expired() => Woke::Idle,
                () = self.content.expired() => Woke::NoContent,
                read = response.chunk() => Woke::Read(read),
            }
        } else {
            tokio::select! {
                biased;
                read = response.chunk() => Woke::Read(read),
                () = cancelled.as_mut() => Woke::Cancelled,
                () = self.idle.expired() => Woke::Idle,
                () = self.content.expired() => Woke::NoContent,
            }
        }
    }
}
