"""Drive `oml proxy -- FAKE delegate` with the official Python ACP SDK (PyPI
`agent-client-protocol`), as an editor would.

Usage: python acp_python_proxy_client.py OML_BINARY FAKE_AGENT CWD
The proxy's init file (XDG_CONFIG_HOME) advises its steps; see tests/proxy.rs. Checks: the
agent's initialize answer comes through, with the client's `_meta` seen by the agent; an
extension method and its `_meta` pass both ways; a prompt changed by advice; a permission
request answered in Lisp (the editor is never asked); a prompt cancelled by the editor ends
`cancelled`; closing stdin ends the proxy. Prints one JSON line with what it saw (the proxy's pid
and exit status among it).
"""

import asyncio
import json
import os
import sys

import acp
from acp.schema import AllowedOutcome, RequestPermissionResponse


class Editor:
    def __init__(self):
        self.texts = []
        self.asked = []
        self.first_chunk = asyncio.Event()

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked.append(tool_call.tool_call_id)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        )

    async def session_update(self, session_id, update, **kwargs):
        if update.session_update == "agent_message_chunk":
            self.texts.append(update.content.text)
            self.first_chunk.set()

    def __getattr__(self, name):
        raise AttributeError(name)


async def main(binary, fake, cwd):
    editor = Editor()
    env = dict(os.environ)
    seen = {}
    args = ("proxy", "--", fake, "delegate")
    async with acp.spawn_agent_process(editor, binary, *args, env=env, cwd=cwd) as (conn, proc):
        seen["proxy_pid"] = proc.pid
        init = await conn.initialize(protocol_version=1)
        seen["agent"] = init.agent_info.name
        echoed = await conn.ext_method("fake/echo", {"a": 1, "_meta": {"trace": "t-1"}})
        seen["echo"] = echoed
        try:
            await conn.ext_method("fake/nothing", {})
        except acp.RequestError as e:
            seen["unknown"] = e.code
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        sid = session.session_id
        result = await conn.prompt(session_id=sid, prompt=[acp.text_block("the question")])
        seen["stop"] = result.stop_reason
        seen["said"] = "".join(editor.texts)
        seen["editor_asked"] = editor.asked
        editor.first_chunk.clear()
        turn = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=[acp.text_block("sleep:30000 long")])
        )
        await asyncio.wait_for(editor.first_chunk.wait(), 20)
        await conn.cancel(session_id=sid)
        cancelled = await asyncio.wait_for(turn, 20)
        seen["cancelled"] = cancelled.stop_reason
        # The end, as an editor closes: EOF, then the proxy's own exit, awaited here rather
        # than raced against the SDK's shutdown timeout (which terminates after 2 s).
        proc.stdin.close()
        seen["proxy_exit"] = await asyncio.wait_for(proc.wait(), 20)
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
