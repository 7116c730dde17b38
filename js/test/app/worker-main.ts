// workerd (Cloudflare Workers): the compiled core comes in as a module import
// and is passed to `init`.
import wasm from "foldline/foldline_bg.wasm";
import { run } from "./chat.js";
import { deps } from "./deps.js";

export default {
  async fetch(): Promise<Response> {
    return Response.json(await run(deps(), wasm));
  },
};
