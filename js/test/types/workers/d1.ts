// A Cloudflare Worker on D1, as its author writes it: the binding typed by
// @cloudflare/workers-types (no DOM lib), passed to the D1 stores as it is.
import { init, createHandler, D1Journal, D1Owners, D1Compression, OpenAiCompatibleModel, type Handler } from "../../../dist/index.js";
import wasm from "foldline/foldline_bg.wasm";

interface Env { DB: D1Database; MEMBERS: string; LLM_URL: string; LLM_KEY: string }

let handler: Handler | undefined;
export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    await init(wasm);
    handler ??= createHandler({
      journal: await D1Journal.open(env.DB),
      owners: await D1Owners.open(env.DB),
      compressionStore: await D1Compression.open(env.DB),
      model: new OpenAiCompatibleModel({ baseUrl: env.LLM_URL, model: "gpt-4o-mini", apiKey: env.LLM_KEY }),
      declaration: { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "tokens", window: 8192 } },
      members: JSON.parse(env.MEMBERS),
    });
    return handler(request, ctx);
  },
} satisfies ExportedHandler<Env>;
