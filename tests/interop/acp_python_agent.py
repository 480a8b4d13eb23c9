"""A small ACP agent built on the official Python SDK (PyPI `agent-client-protocol`), for the
interop test of oml's ACP client (tests/acp_client_interop.rs).

It answers initialize and session/new, and for each prompt streams two agent_message_chunk
updates ("echo: " and the prompt's text), asks for permission once when the prompt says
"permission" (and echoes the chosen option id), then ends the turn. A prompt that says "wait"
blocks until session/cancel arrives and answers cancelled. It needs `authenticate` before
session/new: its one method, codex-style, names the variable it reads (ECHO_TOKEN).
"""

import asyncio
import os
import uuid

import acp
from acp.schema import (
    AgentCapabilities,
    AuthenticateResponse,
    AuthMethodAgent,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)


class EchoAgent:
    def __init__(self):
        self.conn = None
        self.cancelled = {}
        self.authenticated = False

    def on_connect(self, conn):
        self.conn = conn

    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kwargs):
        method = AuthMethodAgent(
            id="echo-token",
            name="Use ECHO_TOKEN",
            description="Requires setting the `ECHO_TOKEN` environment variable.",
        )
        return InitializeResponse(
            protocol_version=1, agent_capabilities=AgentCapabilities(), auth_methods=[method]
        )

    async def authenticate(self, method_id, **kwargs):
        if method_id != "echo-token" or not os.environ.get("ECHO_TOKEN"):
            raise acp.RequestError.auth_required({"method": method_id})
        self.authenticated = True
        return AuthenticateResponse()

    async def new_session(self, cwd, mcp_servers=None, **kwargs):
        if not self.authenticated:
            raise acp.RequestError.auth_required()
        return NewSessionResponse(session_id="py-" + uuid.uuid4().hex[:8])

    async def prompt(self, session_id, prompt, **kwargs):
        text = "".join(getattr(block, "text", "") or "" for block in prompt)
        await self.conn.session_update(session_id, acp.update_agent_message_text("echo: "))
        await self.conn.session_update(session_id, acp.update_agent_message_text(text))
        if "permission" in text:
            options = [
                PermissionOption(option_id="yes", name="Allow once", kind="allow_once"),
                PermissionOption(option_id="no", name="Reject", kind="reject_once"),
            ]
            answer = await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id="call_1", title="Write notes.txt"),
                options=options,
            )
            chosen = getattr(answer.outcome, "option_id", "cancelled")
            await self.conn.session_update(session_id, acp.update_agent_message_text(" chose " + chosen))
        if "wait" in text:
            event = self.cancelled.setdefault(session_id, asyncio.Event())
            await event.wait()
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id, **kwargs):
        self.cancelled.setdefault(session_id, asyncio.Event()).set()


if __name__ == "__main__":
    asyncio.run(acp.run_agent(EchoAgent()))
