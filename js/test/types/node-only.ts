// The package's types under `tsc --strict` with Node's types and no DOM lib,
// without skipLibCheck (a Node server's usual setup).
import { init, createCompactor, MemoryJournal, modelFromFunction, type Declaration } from "../../dist/index.js";

const declaration: Declaration = { targetId: "assistant", compactorId: "assistant-compactor" };

export async function server(bytes: Uint8Array): Promise<number> {
  await init(bytes);
  const c = createCompactor({ journal: new MemoryJournal(), declaration, model: modelFromFunction(async () => "summary") });
  const r = await c.append("c", { role: "user", content: "hi" });
  return r.seq;
}
