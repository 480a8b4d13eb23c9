//! `llm.models`: the endpoint's model list (`GET {base}/models`), cached per base URL, for the
//! editor's model picker.
//!
//! The first call waits at most [`MODELS_WAIT`]; the answer is kept for [`MODELS_CACHE_TTL`]
//! (a failure, as an empty list, for [`MODELS_FAILED_TTL`]), so a dead or slow endpoint costs
//! one bounded wait now and then, not one per session. It does not decide what the picker shows.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use mlua::Lua;
use parking_lot::Mutex;

use crate::lisp::{HostFn, Lisp, create_async_function};
use crate::llm::LlmClient;

/// How long `llm.models` waits for the endpoint's list at most.
pub const MODELS_WAIT: Duration = Duration::from_secs(2);

/// How long a list the endpoint gave is kept.
pub const MODELS_CACHE_TTL: Duration = Duration::from_secs(600);

/// How long a failure (no list) is kept before the endpoint is asked again.
pub const MODELS_FAILED_TTL: Duration = Duration::from_secs(60);

pub(super) const MODELS_FNS: &[HostFn] = &[HostFn {
    name: "models",
    args: "",
    doc: "The model ids the endpoint lists (GET <llm.base-url>/models), sorted: waits at most 2 \
          s, keeps the answer 10 minutes (a failure, as an empty list, 1 minute). Sends \
          llm.api-key and llm.headers like a model call; without a key, OpenAI's own endpoint \
          is not asked.",
    make: |lua| create_async_function(lua, models),
}];

type Cache = Mutex<HashMap<String, (Instant, Duration, Vec<String>)>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Cache::default)
}

fn client() -> Arc<LlmClient> {
    static CLIENT: OnceLock<Arc<LlmClient>> = OnceLock::new();
    CLIENT.get_or_init(|| Arc::new(LlmClient::new())).clone()
}

/// `llm.models`.
fn models(lua: Lua, (): ()) -> impl Future<Output = mlua::Result<Vec<String>>> {
    let config = Lisp::from_lua(&lua)
        .ok_or_else(|| mlua::Error::RuntimeError("no Lisp".into()))
        .and_then(|lisp| {
            super::config(&lisp).map_err(|e| mlua::Error::RuntimeError(e.to_string()))
        });
    async move {
        let config = config?;
        // OpenAI lists models only to a key: without one, asking is a request sure to fail.
        if config.api_key.is_none() && config.base_url == crate::llm::DEFAULT_BASE_URL {
            return Ok(Vec::new());
        }
        let key = config.base_url.clone();
        {
            let cached = cache().lock();
            if let Some((at, ttl, ids)) = cached.get(&key)
                && at.elapsed() < *ttl
            {
                return Ok(ids.clone());
            }
        }
        let (ttl, ids) = match client().list_models(&config, MODELS_WAIT).await {
            Ok(ids) => (MODELS_CACHE_TTL, ids),
            Err(e) => {
                tracing::debug!("no model list from {key}: {e}");
                (MODELS_FAILED_TTL, Vec::new())
            }
        };
        cache()
            .lock()
            .insert(key, (Instant::now(), ttl, ids.clone()));
        Ok(ids)
    }
}
