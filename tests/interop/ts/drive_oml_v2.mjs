// Drives `oml acp` over the v2 draft with the official SDK's `experimental/v2` client, whose
// zod schemas check every message it reads (a message that does not validate fails the run).
//
// Usage: node drive_oml_v2.mjs OML_BINARY CWD, or node drive_oml_v2.mjs URL CWD TOKEN_FILE for
// `oml acp --listen` over the SDK's HTTP client.
// The model environment (OPENAI_*) and XDG folders come from this process's environment; the
// user init offers `acp.protocol-versions [1 2]`. The fake model first asks the user a
// question (`ask_user`: an elicitation), then calls `write` (asked: the permission question),
// then answers. Checks: the v2 initialize answer, session/new, a
// prompt acknowledged with a message id and ended by the `idle` state update, the updates in
// v2 shapes, then session/resume with a replay. Prints one JSON line with what it saw.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk/experimental/v2";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";

const [oml, cwd, tokenFile] = process.argv.slice(2);
let child = null;
let stream;
if (oml.startsWith("http")) {
  const token = readFileSync(tokenFile, "utf8").trim();
  stream = createHttpStream(oml, { headers: { Authorization: `Bearer ${token}` } });
} else {
  child = spawn(oml, ["acp"], { cwd, stdio: ["pipe", "pipe", "inherit"] });
  stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
}

const seen = { updates: [], permissions: [], states: [], elicitations: [] };
let idle = null;
const app = client({ name: "oml-interop-v2" })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    seen.permissions.push({ title: params.title, subject: params.subject?.type ?? null,
                            toolCallId: params.subject?.toolCall?.toolCallId ?? null });
    const allow = params.options.find((o) => o.kind === "allow_once") ?? params.options[0];
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onRequest(methods.client.elicitation.create, ({ params }) => {
    seen.elicitations.push({ mode: params.mode, message: params.message });
    return { action: "accept", content: { answer: "sqlite" } };
  })
  .onNotification(methods.client.session.update, ({ params }) => {
    const u = params.update;
    seen.updates.push(u);
    if (u.sessionUpdate === "state_update") {
      seen.states.push(u.stopReason ? `${u.state}:${u.stopReason}` : u.state);
      if (u.state === "idle" && u.stopReason && idle) idle(u.stopReason);
    }
  });

await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(methods.agent.initialize, {
    protocolVersion: 2,
    info: { name: "oml-interop-v2", version: "1.0.0" },
    capabilities: { elicitation: { form: {} } },
  });
  seen.protocolVersion = init.protocolVersion;
  seen.agent = init.info.name;
  seen.sessionCapabilities = Object.keys(init.capabilities.session ?? {}).sort();
  const session = await ctx.request(methods.agent.session.new, { cwd, mcpServers: [] });
  const sid = session.sessionId;
  seen.configIds = (session.configOptions ?? []).map((o) => o.configId);
  const ended = new Promise((resolve) => (idle = resolve));
  const ack = await ctx.request(methods.agent.session.prompt, {
    sessionId: sid,
    prompt: [{ type: "text", text: "write the file" }],
  });
  seen.ackMessageId = ack.messageId;
  seen.stopReason = await ended;
  idle = null;
  seen.turn = seen.updates.map((u) => u.sessionUpdate);
  seen.turnStates = [...seen.states];
  seen.userMessage = seen.updates.find((u) => u.sessionUpdate === "user_message") ?? null;
  seen.diffs = seen.updates
    .filter((u) => u.sessionUpdate === "tool_call_update")
    .flatMap((u) => u.content ?? [])
    .filter((c) => c.type === "diff");
  seen.updates.length = 0;
  seen.states.length = 0;
  const resumed = await ctx.request(methods.agent.session.resume, {
    sessionId: sid, cwd, mcpServers: [], replayFrom: { type: "start" },
  });
  seen.resumeConfigIds = (resumed.configOptions ?? []).map((o) => o.configId);
  // The SDK hands notifications to their handler apart from answers: the state update, sent
  // before the answer, may reach the handler just after it.
  for (let i = 0; i < 100 && seen.states.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  seen.replay = seen.updates.map((u) => u.sessionUpdate);
  seen.replayStates = [...seen.states];
});
child?.kill();
console.log(JSON.stringify(seen));
process.exit(0);
