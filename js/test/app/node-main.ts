// Node: `init()` finds the .wasm itself (in the package, or beside a bundle).
import { run } from "./chat.js";
import { deps } from "./deps.js";

console.log(JSON.stringify(await run(deps())));
