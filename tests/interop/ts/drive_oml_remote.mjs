// Drives `oml acp --listen` over ACP's remote transport with the official SDK's clients:
// `experimental/http-client` (Streamable HTTP) or `experimental/ws-client` (WebSocket).
//
// Usage: node [--experimental-websocket] drive_oml_remote.mjs URL TOKEN_FILE http|ws CWD
// A first connection runs a turn whose `write` is asked and allowed, then goes away; a second
// connection loads the session (its history comes back as updates). Prints one JSON line.

import { readFileSync } from "node:fs";
import { client, methods } from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";

const [url, tokenFile, mode, cwd] = process.argv.slice(2);
const token = readFileSync(tokenFile, "utf8").trim();

function open() {
  if (mode === "ws") {
    // Node's own WebSocket cannot send headers: the token rides as a subprotocol.
    return createWebSocketStream(url.replace(/^http/, "ws"), {
      WebSocket: globalThis.WebSocket,
      protocols: ["acp", `acp.bearer.${token}`],
    });
  }
  return createHttpStream(url, { headers: { Authorization: `Bearer ${token}` } });
}

const seen = { permissions: 0, updates: [], replay: [] };
function app(into) {
  return client({ name: "oml-remote" })
    .onRequest(methods.client.session.requestPermission, ({ params }) => {
      seen.permissions += 1;
      const allow = params.options.find((o) => o.kind === "allow_once") ?? params.options[0];
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    })
    .onNotification(methods.client.session.update, ({ params }) => {
      into.push(params.update.sessionUpdate);
    });
}

const sid = await app(seen.updates).connectWith(open(), async (ctx) => {
  const init = await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  seen.protocolVersion = init.protocolVersion;
  const { sessionId } = await ctx.request(methods.agent.session.new, { cwd, mcpServers: [] });
  const r = await ctx.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "write the file" }],
  });
  seen.stopReason = r.stopReason;
  return sessionId;
});

await app(seen.replay).connectWith(open(), async (ctx) => {
  await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  await ctx.request(methods.agent.session.load, { sessionId: sid, cwd, mcpServers: [] });
  // Updates reach their handler apart from answers: let the last replayed ones land.
  for (let i = 0; i < 100 && !seen.replay.includes("agent_message_chunk"); i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
});
console.log(JSON.stringify(seen));
process.exit(0);
