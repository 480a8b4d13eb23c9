//! The session methods of [`Client`]: `session/new`, `load`, `resume`, `fork`, `list`, `close`, and a
//! session's mode, config options and model. Each sends one request and returns the answer as
//! on the wire; a method the agent does not offer is refused before anything is sent.

use std::path::Path;

use serde_json::Value;

use super::client::{Client, absolute, capability, null_to_object};
use super::{Category, ClientError, Update};
use crate::acp::requests::{
    ListSessionsRequest, NewSessionRequest, ReopenRequest, SessionRequest, SetConfigOptionRequest,
    SetModeRequest, SetModelRequest, params,
};

impl Client {
    /// `session/new` with an absolute `cwd` and `mcpServers: []`. Returns the answer as on the
    /// wire and the updates that arrived for the new session before its answer.
    pub async fn new_session(&self, cwd: &Path) -> Result<(Value, Vec<Update>), ClientError> {
        self.new_session_with(cwd, Value::Array(Vec::new()), &[])
            .await
    }

    /// `session/new` with an absolute `cwd`, the MCP servers `mcp_servers` (a list of ACP
    /// `McpServer` objects, sent as given) and the additional workspace roots `more` (absolute;
    /// sent only to an agent that advertises `sessionCapabilities.additionalDirectories`, else
    /// refused before anything is sent), answered as [`Client::new_session`].
    pub async fn new_session_with(
        &self,
        cwd: &Path,
        mcp_servers: Value,
        more: &[std::path::PathBuf],
    ) -> Result<(Value, Vec<Update>), ClientError> {
        let cwd = absolute(cwd)?;
        if !more.is_empty() {
            let offered = &self.initialized().capabilities.session_capabilities;
            if !offered.additional_directories.0 {
                return Err(capability(
                    "additionalDirectories",
                    "sessionCapabilities.additionalDirectories",
                ));
            }
        }
        let more = more
            .iter()
            .map(|d| absolute(d))
            .collect::<Result<Vec<_>, _>>()?;
        let request = NewSessionRequest {
            cwd: &cwd,
            mcp_servers: &mcp_servers,
            additional_directories: &more,
        };
        let answer = self.request("session/new", params(&request)).await?;
        let Some(id) = crate::acp::answers::session_id(&answer) else {
            return Err(ClientError::new(
                Category::Protocol,
                "the agent's session/new answer has no sessionId",
            ));
        };
        let held = self.router().register(id);
        let roots = std::iter::once(cwd).chain(more.iter().cloned()).collect();
        self.router().set_roots(id, roots);
        Ok((answer, held))
    }

    /// `session/load` (when advertised): the replay arrives as updates before the answer.
    pub async fn load_session(
        &self,
        session_id: &str,
        cwd: &Path,
    ) -> Result<(Value, Vec<Update>), ClientError> {
        if !self.can_load_session() {
            return Err(capability("session/load", "loadSession"));
        }
        let answer = self.reopen("session/load", session_id, cwd).await?;
        let held = self.router().register(session_id);
        self.router().set_roots(session_id, vec![absolute(cwd)?]);
        Ok((null_to_object(answer), held))
    }

    /// `session/resume` (when advertised; no replay).
    pub async fn resume_session(&self, session_id: &str, cwd: &Path) -> Result<Value, ClientError> {
        if !self.has_session_capability("resume") {
            return Err(capability("session/resume", "sessionCapabilities.resume"));
        }
        let answer = self.reopen("session/resume", session_id, cwd).await?;
        self.router().register(session_id);
        self.router().set_roots(session_id, vec![absolute(cwd)?]);
        Ok(null_to_object(answer))
    }

    /// `session/fork` (when advertised): a new session of the agent with `session_id`'s
    /// history, answered as [`Client::new_session`] (its id in the answer).
    pub async fn fork_session(
        &self,
        session_id: &str,
        cwd: &Path,
    ) -> Result<(Value, Vec<Update>), ClientError> {
        if !self.has_session_capability("fork") {
            return Err(capability("session/fork", "sessionCapabilities.fork"));
        }
        let answer = self.reopen("session/fork", session_id, cwd).await?;
        let Some(id) = crate::acp::answers::session_id(&answer) else {
            return Err(ClientError::new(
                Category::Protocol,
                "the agent's session/fork answer has no sessionId",
            ));
        };
        let held = self.router().register(id);
        Ok((answer, held))
    }

    /// `session/load`, `session/resume` or `session/fork` of `session_id` in `cwd` (made
    /// absolute).
    async fn reopen(
        &self,
        method: &str,
        session_id: &str,
        cwd: &Path,
    ) -> Result<Value, ClientError> {
        let cwd = absolute(cwd)?;
        let request = ReopenRequest {
            session_id,
            cwd: &cwd,
            mcp_servers: [],
        };
        self.request(method, params(&request)).await
    }

    /// `session/list` (when advertised), one page.
    pub async fn list_sessions(
        &self,
        cwd: Option<&Path>,
        cursor: Option<&str>,
    ) -> Result<Value, ClientError> {
        if !self.has_session_capability("list") {
            return Err(capability("session/list", "sessionCapabilities.list"));
        }
        let cwd = cwd.map(absolute).transpose()?;
        let request = ListSessionsRequest {
            cwd: cwd.as_deref(),
            cursor,
        };
        self.request("session/list", params(&request)).await
    }

    /// `logout` (when the agent advertises `agentCapabilities.auth.logout`): the agent forgets
    /// its credentials; sessions need `authenticate` again.
    pub async fn logout(&self) -> Result<(), ClientError> {
        if !self.initialized().capabilities.auth.logout.0 {
            return Err(capability("logout", "agentCapabilities.auth.logout"));
        }
        let request = crate::acp::requests::Offered {};
        self.request("logout", params(&request)).await.map(|_| ())
    }

    /// `session/close` (only when advertised).
    pub async fn close_session(&self, session_id: &str) -> Result<(), ClientError> {
        if !self.has_session_capability("close") {
            return Err(capability("session/close", "sessionCapabilities.close"));
        }
        let request = SessionRequest { session_id };
        self.request("session/close", params(&request)).await?;
        self.router().forget(session_id);
        Ok(())
    }

    /// `session/delete` (when advertised): the agent forgets the stored session.
    pub async fn delete_session(&self, session_id: &str) -> Result<(), ClientError> {
        if !self.has_session_capability("delete") {
            return Err(capability("session/delete", "sessionCapabilities.delete"));
        }
        let request = SessionRequest { session_id };
        self.request("session/delete", params(&request)).await?;
        self.router().forget(session_id);
        Ok(())
    }

    /// `session/set_mode`.
    pub async fn set_mode(&self, session_id: &str, mode_id: &str) -> Result<Value, ClientError> {
        let request = SetModeRequest {
            session_id,
            mode_id,
        };
        self.request("session/set_mode", params(&request))
            .await
            .map(null_to_object)
    }

    /// `session/set_config_option`; returns the answer (the full `configOptions`).
    pub async fn set_config_option(
        &self,
        session_id: &str,
        config_id: &str,
        value: Value,
    ) -> Result<Value, ClientError> {
        let request = SetConfigOptionRequest {
            session_id,
            config_id,
            value: &value,
        };
        self.request("session/set_config_option", params(&request))
            .await
            .map(null_to_object)
    }

    /// The legacy, unstable `session/set_model`.
    pub async fn set_model(&self, session_id: &str, model_id: &str) -> Result<Value, ClientError> {
        let request = SetModelRequest {
            session_id,
            model_id,
        };
        self.request("session/set_model", params(&request))
            .await
            .map(null_to_object)
    }
}
