// The fetch handler's scenario in Node: the handler is called directly.
import { test } from "node:test";
import * as f from "../dist/node.js";
import { world, scenario } from "./handler-scenario.mjs";

await f.init();

test("the fetch handler passes the foldline serve scenario", async () => {
  const w = await world(f);
  const pending = [];
  const ctx = { waitUntil: (p) => pending.push(p) };
  await scenario({
    call: (method, path, token, body, headers = {}) => w.fetch(new Request(`http://local${path}`, {
      method, body, headers: { ...headers, ...(token ? { authorization: `Bearer ${token}` } : {}) },
    }), ctx),
    journal: (c) => w.journal.readEvents(c),
    setMode: w.setMode,
    crash: w.crash,
  });
  await Promise.allSettled(pending);
});
