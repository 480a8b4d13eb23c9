// Drives `oml acp` with the official ACP TypeScript SDK (@agentclientprotocol/sdk, pinned in
// package.json), whose schemas check every message it reads.
//
// Usage: node drive_oml.mjs OML_BINARY CWD EXTRA_DIR
// The model environment (OPENAI_*) and XDG folders come from this process's environment; the
// fake model first asks `ask_user`, then answers. Checks: initialize (the capabilities oml
// advertises), session/new with additionalDirectories, a prompt whose question comes back as an
// elicitation the SDK answers, message chunks with a messageId, and $/cancel_request of a
// running prompt. Prints one JSON line with what it saw.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const [oml, cwd, extra] = process.argv.slice(2);
const child = spawn(oml, ["acp"], { cwd, stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const seen = { chunks: [], elicitations: [] };
const app = client({ name: "oml-interop" })
  .onRequest(methods.client.session.requestPermission, ({ params }) => ({
    outcome: { outcome: "selected", optionId: params.options[0].optionId },
  }))
  .onRequest(methods.client.elicitation.create, ({ params }) => {
    seen.elicitations.push({ mode: params.mode, message: params.message });
    return { action: "accept", content: { answer: "sqlite" } };
  })
  .onNotification(methods.client.session.update, ({ params }) => {
    const u = params.update;
    if (u.sessionUpdate === "agent_message_chunk") {
      seen.chunks.push({ text: u.content.text, messageId: u.messageId ?? null });
    }
  });

await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: { elicitation: { form: {} } },
  });
  seen.protocolVersion = init.protocolVersion;
  seen.additionalDirectories = init.agentCapabilities?.sessionCapabilities?.additionalDirectories ?? null;
  const session = await ctx.request(methods.agent.session.new, {
    cwd,
    mcpServers: [],
    additionalDirectories: [extra],
  });
  const sid = session.sessionId;
  const first = await ctx.request(methods.agent.session.prompt, {
    sessionId: sid,
    prompt: [{ type: "text", text: "set it up" }],
  });
  seen.firstStop = first.stopReason;
  // The SDK may run a notification's handler after the answer that followed it on the wire
  // has resolved its request, so the first turn's chunks are not all counted yet here. Handlers
  // do run in line order: the first turn's chunks are those before the second turn's first.
  // The second reply hangs after its first chunk ("working"); aborting the request makes the
  // SDK send $/cancel_request for it, and oml answers the prompt cancelled.
  const abort = new AbortController();
  const pending = ctx.request(
    methods.agent.session.prompt,
    { sessionId: sid, prompt: [{ type: "text", text: "take your time" }] },
    { cancellationSignal: abort.signal },
  );
  const secondStarted = () => seen.chunks.findIndex((c) => c.text === "working");
  while (secondStarted() < 0) await new Promise((r) => setTimeout(r, 10));
  abort.abort();
  const second = await pending;
  seen.secondStop = second.stopReason;
  seen.firstChunks = seen.chunks.slice(0, secondStarted());
});
child.kill();
console.log(JSON.stringify(seen));
