// workerd (Cloudflare Workers): the compiled core comes in as a module import
// and is passed to `init`. `/` runs the chat; `/handler` runs the edge
// handler on the D1 stores, as the README's worker does.
import wasm from "foldline/foldline_bg.wasm";
import { init, createHandler, D1Compression, D1Journal, D1Owners, modelFromFunction, type D1Like, type ExecutionContext } from "foldline";
import { run } from "./chat.js";
import { deps } from "./deps.js";

export default {
  async fetch(req: Request, env: { DB: D1Like }): Promise<Response> {
    if (new URL(req.url).pathname === "/handler") return Response.json(await edge(env.DB));
    return Response.json(await run(deps(), wasm));
  },
};

/** A member's 120 messages through the handler on D1, then the chain's verdict and the context's newest message. */
async function edge(db: D1Like): Promise<{ ok: boolean; boundaries: number; newest: unknown }> {
  await init(wasm);
  const handler = createHandler({
    journal: await D1Journal.open(db),
    owners: await D1Owners.open(db),
    compressionStore: await D1Compression.open(db),
    model: modelFromFunction(async (p) => `Summary of ${p.input.turnCount} turns.`),
    declaration: { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "tokens", window: 8192 } },
    members: [{ id: "ana", tokenSha256: "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b" }], // "secret"
  });
  const call = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const waits: Promise<unknown>[] = [];
    const ctx: ExecutionContext = { waitUntil: (p) => void waits.push(p) };
    const init: RequestInit = { method, headers: { authorization: "Bearer secret", "content-type": "application/json" } };
    if (body !== undefined) init.body = JSON.stringify(body);
    const res = await handler(new Request(`http://edge${path}`, init), ctx);
    const answer: unknown = await res.json();
    await Promise.all(waits); // the automatic check an append starts
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(answer)}`);
    return answer;
  };
  for (let i = 1; i <= 120; i++) {
    await call("POST", "/api/conversations/trip/messages", [{ role: i % 2 ? "user" : "assistant", content: `message ${i} ${"about the trip ".repeat(40)}` }]);
  }
  const verify = (await call("GET", "/api/conversations/trip/verify")) as { ok: boolean; resolution: { accepted: string[] } };
  const context = (await call("GET", "/api/conversations/trip/context?format=openai&messages=true")) as Array<{ content: unknown }>;
  return { ok: verify.ok, boundaries: verify.resolution.accepted.length, newest: context.at(-1)?.content };
}
