"""Drive `oml acp` with the official Python ACP SDK (PyPI `agent-client-protocol`).

Usage: python acp_python_client.py OML_BINARY CWD
The model environment (OPENAI_*) and XDG directories come from this process's environment.
Runs initialize, session/new, a prompt whose tool call asks for permission (answered
allow_once, chosen by kind), and a prompt cancelled after its first chunk. Prints one JSON line
with what it saw and exits 0 when every check held.
"""

import asyncio
import json
import os
import sys

import acp
from acp.schema import AllowedOutcome, RequestPermissionResponse


class Recorder:
    def __init__(self):
        self.updates = []
        self.permission_requests = []
        self.first_chunk = asyncio.Event()

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.permission_requests.append(tool_call.tool_call_id)
        allow = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update.session_update)
        if update.session_update == "agent_message_chunk":
            self.first_chunk.set()

    def __getattr__(self, name):
        # fs/* and terminal/* are not advertised, so oml never calls them.
        raise AttributeError(name)


async def main(binary, cwd):
    client = Recorder()
    env = {k: v for k, v in os.environ.items()}
    async with acp.spawn_agent_process(client, binary, "acp", env=env, cwd=cwd) as (conn, proc):
        init = await conn.initialize(protocol_version=1)
        assert init.protocol_version == 1, init
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        sid = session.session_id
        result = await conn.prompt(session_id=sid, prompt=[acp.text_block("write the file")])
        assert result.stop_reason == "end_turn", result
        written = os.path.exists(os.path.join(cwd, "py.txt"))
        assert written, "the permitted write happened"
        assert client.permission_requests == ["call_py"], client.permission_requests
        assert "tool_call" in client.updates and "tool_call_update" in client.updates, client.updates

        client.first_chunk.clear()
        turn = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=[acp.text_block("take your time")])
        )
        await asyncio.wait_for(client.first_chunk.wait(), 20)
        await conn.cancel(session_id=sid)
        cancelled = await asyncio.wait_for(turn, 20)
        assert cancelled.stop_reason == "cancelled", cancelled
    print(json.dumps({"ok": True, "updates": client.updates}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
