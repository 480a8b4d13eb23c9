//! The endpoint's own list of models: `GET {base}/models` (OpenAI's `{data: [{id}]}`; on the
//! Anthropic protocol `GET {base}/v1/models`, the same shape), for the model picker of an editor.
//!
//! One request, bounded in time as a whole, never retried: a picker that waits on a slow or
//! dead endpoint would hold up `session/new`. It knows nothing of caching (the caller keeps the
//! answer) nor of what the list is shown in.

use std::time::Duration;

use serde_json::Value;

use super::client::{LlmClient, authorize};
use super::{LlmConfig, LlmError};

/// Model ids kept of one answer at most (OpenRouter lists hundreds).
pub const MODELS_MAX: usize = 500;

/// The URL of the model list for `base_url` (trailing slashes removed).
pub fn models_url(base_url: &str) -> String {
    super::Api::Chat.models_url(base_url)
}

impl LlmClient {
    /// The model ids `GET {base}/models` lists, sorted, at most [`MODELS_MAX`]; an error when
    /// the whole exchange takes longer than `within`, or the answer is not a model list.
    pub async fn list_models(
        &self,
        config: &LlmConfig,
        within: Duration,
    ) -> Result<Vec<String>, LlmError> {
        let url = config.api().models_url(&config.base_url);
        let http = self.http(config)?;
        let request = authorize(http.get(&url), config)?;
        let exchange = async {
            let response = request.send().await.map_err(|e| LlmError::Connect {
                url: url.clone(),
                reason: e.to_string(),
            })?;
            let status = response.status().as_u16();
            let body = response.bytes().await.map_err(|e| LlmError::Connect {
                url: url.clone(),
                reason: e.to_string(),
            })?;
            if !(200..300).contains(&status) {
                let body = String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
                return Err(LlmError::Http { status, body });
            }
            serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| model_ids(&v))
                .ok_or_else(|| LlmError::Config(format!("{url} did not answer with a model list")))
        };
        tokio::time::timeout(within, exchange)
            .await
            .map_err(|_| LlmError::Connect {
                url: url.clone(),
                reason: format!("no model list within {}s", within.as_secs_f64()),
            })?
    }
}

/// The ids of a model list — OpenAI's and Anthropic's `{data: [{id}]}`, or Gemini's
/// `{models: [{name: "models/<id>"}]}` — sorted and capped; `None` when `v` is none of them.
pub fn model_ids(v: &Value) -> Option<Vec<String>> {
    let listed: Vec<&str> = match (v.get("data"), v.get("models")) {
        (Some(data), _) => data
            .as_array()?
            .iter()
            .filter_map(|m| m.get("id").and_then(Value::as_str))
            .collect(),
        (None, Some(models)) => models
            .as_array()?
            .iter()
            .filter_map(|m| m.get("name").and_then(Value::as_str))
            .map(|name| name.trim_start_matches("models/"))
            .collect(),
        (None, None) => return None,
    };
    let mut ids: Vec<String> = listed
        .into_iter()
        .filter(|id| !id.trim().is_empty())
        .map(str::to_owned)
        .collect();
    ids.sort();
    ids.dedup();
    ids.truncate(MODELS_MAX);
    Some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_lists_read_as_sorted_ids() {
        let v = json!({"object": "list", "data": [{"id": "b"}, {"id": "a"}, {"id": ""}, {"x": 1}]});
        assert_eq!(model_ids(&v), Some(vec!["a".to_owned(), "b".to_owned()]));
        assert_eq!(model_ids(&json!({"error": "no"})), None);
        let gemini = json!({"models": [{"name": "models/gemini-b"}, {"name": "models/gemini-a"}]});
        assert_eq!(
            model_ids(&gemini),
            Some(vec!["gemini-a".to_owned(), "gemini-b".to_owned()])
        );
        assert_eq!(models_url("http://h/v1/"), "http://h/v1/models");
    }
}
