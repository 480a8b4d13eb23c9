//! An `http` hook: the event's JSON POSTed to the hook's URL with its headers, as they are
//! written (no variables are put in), following no redirect. A 2xx answer is exit 0 with the
//! body as stdout; any other status is a non-blocking error with the body as stderr, as a
//! crashing command's.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{End, HookRun, MAX_HOOK_OUTPUT_BYTES, text_of};
use crate::cancel::CancelToken;

/// One HTTP hook to call.
pub struct HttpHook<'a> {
    pub url: &'a str,
    pub headers: &'a BTreeMap<String, String>,
    pub body: Vec<u8>,
    pub timeout: Duration,
}

/// POST the event; never fails: an unreachable endpoint ends [`End::Failed`].
pub async fn run(hook: HttpHook<'_>, cancel: &CancelToken) -> HookRun {
    let started = Instant::now();
    let call = call(&hook);
    let end = tokio::select! {
        biased;
        () = cancel.cancelled() => Err(End::Cancelled),
        () = tokio::time::sleep(hook.timeout) => Err(End::TimedOut),
        answer = call => answer,
    };
    let (end, stdout, stderr) = match end {
        Ok((status, body)) if (200..300).contains(&status) => (End::Exited(0), body, String::new()),
        Ok((status, body)) => (End::Exited(i32::from(status)), String::new(), body),
        Err(end) => (end, String::new(), String::new()),
    };
    HookRun {
        end,
        stdout,
        stderr,
        duration: started.elapsed(),
    }
}

async fn call(hook: &HttpHook<'_>) -> Result<(u16, String), End> {
    let failed = |e: reqwest::Error| End::Failed(format!("cannot call {}: {e}", hook.url));
    let client = reqwest::Client::builder()
        .timeout(hook.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(failed)?;
    let mut request = client
        .post(hook.url)
        .header("content-type", "application/json")
        .body(hook.body.clone());
    for (name, value) in hook.headers {
        request = request.header(name, value);
    }
    let mut response = request.send().await.map_err(failed)?;
    let status = response.status().as_u16();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        let room = MAX_HOOK_OUTPUT_BYTES.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if room == 0 {
            break;
        }
    }
    Ok((status, text_of(&body)))
}
