"""Harbor's generic ACP agent (harbor.agents.installed.acp.AcpAgent, from the pinned package)
set up for oml on this machine, for tests/harbor.rs: what Harbor does before and after it runs
its `acp_runner.py` in a task container, done by Harbor's own class.

    python harbor_acp.py prepare AGENT_JSON OML LOGS_DIR ROOT MODEL INSTRUCTION [ARGS]
    python harbor_acp.py convert AGENT_JSON OML LOGS_DIR ROOT MODEL INSTRUCTION [ARGS]

The registry entry is oml's agent.json with its distribution replaced by a `local` one running
OML with the arguments agent.json gives its binary, or ARGS (a JSON list) instead (Harbor's own
distribution kind for an agent already in the image). The only stand-in is the task container:
`Container` takes Harbor's uploads into ROOT (where Docker's upload would put them, under ROOT)
and records the commands Harbor would run there.

`prepare` runs `configure` (which writes the launcher and uploads it with the runner) and
`run` (which would start the runner), and prints one JSON object: the launcher, the runner and
the environment Harbor gives it, with the launcher Harbor makes from the unchanged agent.json
for linux-x86_64. The test then runs the runner itself. `convert` runs `configure` again (it
is what records the distribution kind) and `populate_context_post_run` on what the runner left
in LOGS_DIR, and prints the context Harbor keeps.

It knows nothing of oml beyond agent.json; the test knows what oml should have done.
"""

import asyncio
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

from harbor.agents.installed.acp import AcpAgent
from harbor.models.agent.context import AgentContext

# The platform of the task image the test stands for.
PLATFORM = "linux-x86_64"


class Container:
    """The task container's file system under ROOT, and the commands Harbor runs in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.commands: list[dict] = []
        self.default_user = None

    def here(self, target: str) -> Path:
        return self.root / target.lstrip("/")

    async def upload_file(self, source_path, target_path) -> None:
        target = self.here(str(target_path))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(Path(source_path).read_bytes())
        # Harbor makes both executable right after (`chmod +x`, recorded below).
        target.chmod(0o755)

    async def exec(self, command, user=None, env=None, cwd=None, timeout_sec=None):
        self.commands.append({"command": command, "user": user, "env": env or {}})
        return SimpleNamespace(return_code=0, stdout="", stderr="")


def agent(entry: dict, logs_dir: Path, model: str) -> AcpAgent:
    return AcpAgent(
        logs_dir=logs_dir,
        model_name=model,
        registry_entry=entry,
        target_platform=PLATFORM,
        # Harbor's own switch: the model name is not looked up in LiteLLM's tables (which
        # takes seconds to load, and means nothing to an ACP agent that picks its own model).
        skip_model_parsing=True,
    )


def local_entry(agent_json: dict, oml: str, args: list | None) -> dict:
    """agent.json with a `local` distribution: OML with ARGS, else its binary's arguments."""
    if args is None:
        args = agent_json["distribution"]["binary"][PLATFORM]["args"]
    entry = dict(agent_json)
    entry["distribution"] = {"local": {"cmd": oml, "args": args}}
    return entry


async def prepare(entry: dict, agent_json: dict, logs: Path, root: Path, model: str, text: str):
    container = Container(root)
    acp = agent(entry, logs, model)
    await acp.configure(container)
    await acp.run(text, container, AgentContext())
    run = container.commands[-1]
    # The same agent.json as published: the launcher of the binary distribution.
    (logs / "published").mkdir(exist_ok=True)
    published = agent(agent_json, logs / "published", model)
    await published.configure(Container(root / "published"))
    return {
        "launcher": str(container.here(acp._LAUNCHER_REMOTE_PATH)),
        "runner": str(container.here(acp._RUNNER_REMOTE_PATH)),
        "launcher_text": (logs / "acp-launch.sh").read_text(),
        "binary_launcher_text": (logs / "published" / "acp-launch.sh").read_text(),
        "run_command": run["command"],
        "run_env": run["env"],
    }


async def convert(entry: dict, agent_json: dict, logs: Path, root: Path, model: str, text: str):
    acp = agent(entry, logs, model)
    await acp.configure(Container(root))
    context = AgentContext()
    acp.populate_context_post_run(context)
    return {"context": context.model_dump(mode="json")}


def main() -> int:
    step, agent_json, oml, logs, root, model, text = sys.argv[1:8]
    args = json.loads(sys.argv[8]) if len(sys.argv) > 8 else None
    published = json.loads(Path(agent_json).read_text())
    entry = local_entry(published, oml, args)
    logs_dir, root_dir = Path(logs), Path(root)
    logs_dir.mkdir(parents=True, exist_ok=True)
    action = {"prepare": prepare, "convert": convert}[step]
    out = asyncio.run(action(entry, published, logs_dir, root_dir, model, text))
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    raise SystemExit(main())
