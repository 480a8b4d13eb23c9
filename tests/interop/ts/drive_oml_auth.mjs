// Drives `oml acp` with the official ACP TypeScript SDK as an editor that supports terminal auth
// does with an agent from the ACP registry: `initialize` with `auth.terminal`, then
// `authenticate` with the method offered, once without a model configured and once with one.
// The SDK's schemas check both answers.
//
// Usage: node drive_oml_auth.mjs OML_BINARY CWD
// The model environment (OPENAI_*) and XDG folders come from this process's environment; the
// run without a model drops OPENAI_*. Prints one JSON line with what it saw.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const [oml, cwd] = process.argv.slice(2);

async function handshake(env) {
  const child = spawn(oml, ["acp"], { cwd, env, stdio: ["pipe", "pipe", "inherit"] });
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const seen = {};
  await client({ name: "oml-interop" }).connectWith(stream, async (ctx) => {
    const init = await ctx.request(methods.agent.initialize, {
      protocolVersion: 1,
      clientCapabilities: { auth: { terminal: true } },
    });
    seen.authMethods = init.authMethods;
    try {
      seen.result = await ctx.request(methods.agent.authenticate, {
        methodId: init.authMethods[0].id,
      });
    } catch (e) {
      seen.error = { code: e.code, data: e.data ?? null };
    }
  });
  child.kill();
  return seen;
}

const withModel = await handshake(process.env);
const bare = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !k.startsWith("OPENAI_")),
);
const withoutModel = await handshake(bare);
console.log(JSON.stringify({ withModel, withoutModel }));
