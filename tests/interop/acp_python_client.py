"""Drive `oml acp` with the official Python ACP SDK (PyPI `agent-client-protocol`).

Usage: python acp_python_client.py OML_BINARY CWD
The model environment (OPENAI_*) and XDG directories come from this process's environment.
Runs initialize, session/new, a prompt whose tool call asks for permission (answered
allow_once, chosen by kind), a prompt cancelled after its first chunk, and a prompt in a
session/fork of that session. Then, as an editor that
offers fs and a terminal, a prompt whose read, write and bash go through the client: the buffer it
serves, the file it writes, the command it runs (for real, in a subprocess). Prints one JSON line
with what it saw and exits 0 when every check held.
"""

import asyncio
import json
import os
import sys

import acp
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)


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


class Editor(Recorder):
    """A client with buffers and a terminal, as Zed or Toad."""

    def __init__(self):
        super().__init__()
        self.buffers = {}
        self.written = {}
        self.terminals = {}
        self.terminal_calls = []

    async def read_text_file(self, session_id, path, line=None, limit=None, **kwargs):
        return ReadTextFileResponse(content=self.buffers.get(path, ""))

    async def write_text_file(self, session_id, path, content, **kwargs):
        self.written[path] = content
        return None

    async def create_terminal(self, session_id, command, args=None, env=None, cwd=None,
                              output_byte_limit=None, **kwargs):
        self.terminal_calls.append(("create", [v.name for v in env or []]))
        # As an editor does: its own environment plus the variables the agent asked for.
        merged = dict(os.environ, **{v.name: v.value for v in env or []})
        proc = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, env=merged,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        tid = "term-%d" % (len(self.terminals) + 1)
        self.terminals[tid] = (proc, asyncio.create_task(proc.stdout.read()))
        return CreateTerminalResponse(terminal_id=tid)

    async def wait_for_terminal_exit(self, session_id, terminal_id, **kwargs):
        proc, _ = self.terminals[terminal_id]
        self.terminal_calls.append(("wait", terminal_id))
        return WaitForTerminalExitResponse(exit_code=await proc.wait())

    async def terminal_output(self, session_id, terminal_id, **kwargs):
        proc, output = self.terminals[terminal_id]
        self.terminal_calls.append(("output", terminal_id))
        text = (await output).decode() if proc.returncode is not None else ""
        return TerminalOutputResponse(
            output=text, truncated=False,
            exit_status=TerminalExitStatus(exit_code=proc.returncode))

    async def kill_terminal(self, session_id, terminal_id, **kwargs):
        self.terminals[terminal_id][0].kill()
        return None

    async def release_terminal(self, session_id, terminal_id, **kwargs):
        proc, _ = self.terminals.pop(terminal_id)
        self.terminal_calls.append(("release", terminal_id))
        if proc.returncode is None:
            proc.kill()
        return None


async def as_editor(binary, cwd, env):
    """read, write and bash through the client's fs and terminal."""
    editor = Editor()
    notes = os.path.join(cwd, "notes.txt")
    editor.buffers[notes] = "unsaved buffer\n"
    async with acp.spawn_agent_process(editor, binary, "acp", env=env, cwd=cwd) as (conn, proc):
        caps = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True)
        await conn.initialize(protocol_version=1, client_capabilities=caps)
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="yolo")
        result = await conn.prompt(session_id=sid, prompt=[acp.text_block("use the editor")])
        assert result.stop_reason == "end_turn", result
    out = os.path.join(cwd, "out.txt")
    assert editor.written == {out: "written by the editor"}, editor.written
    assert not os.path.exists(out), "oml did not write the disk itself"
    kinds = [c[0] for c in editor.terminal_calls]
    assert kinds == ["create", "wait", "output", "release"], editor.terminal_calls
    assert editor.terminal_calls[0][1] == ["OML_SANDBOX"], "only the sandbox's flags passed"
    assert editor.terminals == {}, "every terminal released"
    return kinds


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

        # session/fork: a new session with this one's history, answered like session/new.
        assert init.agent_capabilities.session_capabilities.fork is not None, init
        forked = await conn.fork_session(session_id=sid, cwd=cwd, mcp_servers=[])
        assert forked.session_id and forked.session_id != sid, forked
        assert forked.modes is not None, forked
        result = await conn.prompt(
            session_id=forked.session_id, prompt=[acp.text_block("in the fork")]
        )
        assert result.stop_reason == "end_turn", result
    terminal = await as_editor(binary, cwd, env)
    print(json.dumps({"ok": True, "updates": client.updates, "terminal": terminal}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
