#!/usr/bin/env bash
# Refreshes oml's snapshot of the ACP agent registry (catalog/registry/registry.json and
# agent.schema.json), which the binary embeds. A maintainer runs it by hand and commits the
# result; oml itself never queries the registry, and never installs or downloads an agent.
#
#   scripts/refresh-registry.sh                 # from the registry's published URL (network)
#   scripts/refresh-registry.sh --from DIR      # built from a checkout of the registry's repository
#
# With --from, registry.json is built as the registry publishes it: every top-level folder of DIR
# (in name order) with an agent.json, its icon pointing at the registry's CDN, in
# {"version": "1.0.0", "agents": [...], "extensions": []}. Then check the diff, run
# `cargo test --test agents`, `--test registry` and `--test docs` (the catalog table in
# docs/src/agents.md is `oml agents --markdown`), and commit. OML_REGISTRY_URL and
# OML_REGISTRY_DEST change where it reads and writes (tests/registry.rs uses the latter).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${OML_REGISTRY_DEST:-$root/catalog/registry}"
base="${OML_REGISTRY_URL:-https://cdn.agentclientprotocol.com/registry/v1/latest}"
say() { echo "refresh-registry: $*" >&2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if [ "${1:-}" = "--from" ]; then
  src="${2:?usage: refresh-registry.sh [--from REGISTRY-CHECKOUT]}"
  cp "$src/agent.schema.json" "$tmp/agent.schema.json"
  python3 - "$src" "$base" "$tmp/registry.json" <<'PY'
import json, pathlib, sys
src, base, out = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
agents = []
for folder in sorted(p for p in src.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
    manifest = folder / "agent.json"
    if not manifest.is_file():
        continue
    agent = json.loads(manifest.read_text())
    if (folder / "icon.svg").is_file():
        agent["icon"] = f"{base}/{agent['id']}.svg"
    agents.append(agent)
with open(out, "w") as f:
    json.dump({"version": "1.0.0", "agents": agents, "extensions": []}, f, indent=2)
    f.write("\n")
PY
else
  for file in registry.json agent.schema.json; do
    say "fetching $base/$file"
    curl -fsSL --max-time 60 -o "$tmp/$file" "$base/$file"
  done
fi

for file in registry.json agent.schema.json; do
  python3 -m json.tool "$tmp/$file" >/dev/null || { say "$file is not JSON; nothing changed"; exit 1; }
done
mkdir -p "$dest"
cp "$tmp/registry.json" "$tmp/agent.schema.json" "$dest/"
count="$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["agents"]))' "$dest/registry.json")"
say "wrote $dest/registry.json ($count agents) and agent.schema.json; review the diff and commit"
