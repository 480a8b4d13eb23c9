// Drives `oml acp` with the official ACP TypeScript SDK through a turn whose model runs a
// sub-agent (the `task` tool), and reports what a client sees of it: the task card's title,
// statuses, live views, and the `_meta` its last update carries (the sub-agent's session).
//
// Usage: node drive_oml_task.mjs OML_BINARY CWD
// The model environment (OPENAI_*) and XDG folders come from this process's environment.
// Prints one JSON line with what it saw.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const [oml, cwd] = process.argv.slice(2);
const child = spawn(oml, ["acp"], { cwd, stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const seen = { cards: {}, sessions: [] };
const app = client({ name: "oml-interop" })
  .onRequest(methods.client.session.requestPermission, ({ params }) => ({
    outcome: { outcome: "selected", optionId: params.options[0].optionId },
  }))
  .onNotification(methods.client.session.update, ({ params }) => {
    const u = params.update;
    if (u.sessionUpdate !== "tool_call" && u.sessionUpdate !== "tool_call_update") return;
    const card = (seen.cards[u.toolCallId] ??= { titles: [], statuses: [], texts: [], meta: null });
    if (u.title) card.titles.push(u.title);
    if (u.status) card.statuses.push(u.status);
    for (const c of u.content ?? []) {
      if (c.type === "content" && c.content.type === "text") card.texts.push(c.content.text);
    }
    if (u._meta) card.meta = u._meta;
  });

await app.connectWith(stream, async (ctx) => {
  await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  const session = await ctx.request(methods.agent.session.new, { cwd, mcpServers: [] });
  seen.sessionId = session.sessionId;
  const turn = await ctx.request(methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "review the notes" }],
  });
  seen.stop = turn.stopReason;
  const list = await ctx.request(methods.agent.session.list, {});
  seen.sessions = list.sessions.map((s) => s.sessionId);
});
child.kill();
console.log(JSON.stringify(seen));
