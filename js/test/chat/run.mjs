// The reference chat page in a real browser against a real `foldline serve
// --web` on loopback (Chromium driven by playwright-core): two members of
// one room post through their pages (and the assistant over HTTP); both
// pages show every message and the automatic dividers; `/compact`
// shows its progress, survives a reload mid-task (resumed from the task
// pointer) and ends in a completed divider, and is never a message; a
// server killed mid-task shows the generic failed divider once it is back;
// the room member's `/compact` and a stranger get the member-facing refusals;
// a long conversation opens on its latest page, earlier pages on request, and
// an idle page fetches nothing (its long poll answers only a write); an app on
// another origin calls the server once it lets that origin in. Screenshots
// go to js/test/chat/out/.
//   node test/chat/run.mjs [path/to/foldline]
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launchChromium } from "../static.mjs";

const js = new URL("../..", import.meta.url).pathname;
const bin = process.argv[2] ?? join(js, "..", "target", "debug", "foldline");
const out = join(js, "test", "chat", "out");
mkdirSync(out, { recursive: true });
const dir = mkdtempSync(join(tmpdir(), "foldline-chat-"));
const sha = (t) => createHash("sha256").update(t).digest("hex");
writeFileSync(join(dir, "members.json"), JSON.stringify({ members: [{ id: "alice", tokenSha256: sha("alice-token") }, { id: "bob", tokenSha256: sha("bob-token") }] }));
writeFileSync(join(dir, "decl.json"), JSON.stringify({ targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "chars", trigger: 6000, retain: 2000 }, summary: { maxChars: 600 } }));

// A provider whose summaries take `delay` ms, so a task can be seen running.
let delay = 0;
const provider = createServer((req, res) => {
  req.resume();
  req.on("end", () => setTimeout(() => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(`data: ${JSON.stringify({ model: "m", choices: [{ delta: { content: "The member planned a trip: dates, budget and places were agreed." }, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`);
  }, delay));
});
await new Promise((r) => provider.listen(0, "127.0.0.1", r));
const model = `http://127.0.0.1:${provider.address().port}/v1`;

// Pages of two other origins: an app the server lets call (`--allow-origin`)
// and one it does not. Each serves a blank page and the package's
// `foldline/client`, which the page calls the server with.
const clientJs = readFileSync(join(js, "dist", "client.js"));
const elsewhere = async () => {
  const s = createServer((req, res) => {
    if (req.url === "/client.js") res.writeHead(200, { "content-type": "text/javascript" }).end(clientJs);
    else res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>another app</title>");
  });
  await new Promise((r) => s.listen(0, "127.0.0.1", r));
  return { s, origin: `http://127.0.0.1:${s.address().port}` };
};
const app = await elsewhere();
const otherApp = await elsewhere();

let port = 0;
function start() {
  const child = spawn(bin, ["--journal", join(dir, "chat.db"), "--declaration", join(dir, "decl.json"), "--openai-base-url", model,
    "serve", "--listen", `127.0.0.1:${port}`, "--members", join(dir, "members.json"), "--web", "--lease-ms", "1500",
    "--allow-origin", app.origin], { stdio: ["ignore", "ignore", "pipe"] });
  return new Promise((resolve, reject) => {
    let err = "";
    child.stderr.on("data", (d) => {
      err += d;
      const m = /listening on (http:\/\/[\d.:]+)\n/.exec(err);
      if (m) {
        port = Number(new URL(m[1]).port);
        resolve({ child, base: m[1] });
      }
    });
    child.on("exit", (code) => reject(new Error(`foldline serve exited ${code}: ${err}`)));
  });
}

let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok - chat page: ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - chat page: ${name}\n  ${String(e?.stack ?? e).split("\n").slice(0, 8).join("\n  ")}`);
  }
}
const until = async (what, fn, ms = 20_000) => {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

let server = await start();
const browser = await launchChromium();
try {
  const alice = await (await browser.newContext()).newPage();
  const errors = [];
  alice.on("pageerror", (e) => errors.push(String(e)));
  // The page runs under its Content-Security-Policy: anything it blocks is an error here.
  alice.on("console", (m) => /Content Security Policy/.test(m.text()) && errors.push(m.text()));
  const open = async (page, token) => {
    const seen = [];
    page.on("requestfailed", (r) => seen.push(`failed ${r.url()} ${r.failure()?.errorText}`));
    page.on("response", (r) => r.status() >= 400 && seen.push(`${r.status()} ${r.url()}`));
    await page.goto(`${server.base}/#token=${token}&conversation=trip`);
    try {
      await page.waitForSelector("#text", { timeout: 10_000 });
    } catch (e) {
      throw new Error(`the page did not load: ${seen.join("; ")} ${(await page.content()).slice(0, 200)}`);
    }
  };
  const dividers = (page, sel) => page.locator(`li.divider${sel}`).count();
  const post = async (text) => {
    const r = await fetch(`${server.base}/api/conversations/trip/messages`, {
      method: "POST", headers: { authorization: "Bearer alice-token", "content-type": "application/json" },
      body: JSON.stringify({ role: "assistant", content: text }),
    });
    if (r.status !== 201) throw new Error(`post: ${r.status} ${await r.text()}`);
  };

  // `/compact` typed in a page until its task runs (the pending divider):
  // first something older than the exact tail (2,000 characters) for it to
  // fold, kept under the automatic trigger (6,000, with the summary and
  // the room's labeled turns already in view: ~2,000 characters of notes);
  // then, as a member would, asked again while an automatic compaction is
  // running (the page says so).
  const compactNow = async (page) => {
    for (let i = 0; i < 3; i++) await post(`A longer note ${i}: ${"the itinerary in detail, hotel by hotel. ".repeat(16)}`);
    await until("the pending divider", async () => {
      if ((await dividers(page, ".pending")) > 0) return true;
      const said = await page.locator("#status").textContent();
      if (!/Compacting/.test(said)) {
        await page.fill("#text", "/compact");
        await page.press("#text", "Enter");
      }
      await new Promise((r) => setTimeout(r, 400));
      return false;
    }).catch(async (e) => { throw new Error(`${e.message}; the page says: ${await page.locator("#status").textContent()}`); });
  };
  const bobPage = await (await browser.newContext()).newPage();
  await check("two members of one room post from their pages; both see every message and the automatic dividers", async () => {
    await open(alice, "alice-token");
    await alice.fill("#text", "Let us plan the trip together.");
    await alice.press("#text", "Enter");
    await until("the conversation exists", async () => (await alice.locator("li.message").count()) > 0);
    const put = await fetch(`${server.base}/api/conversations/trip/members/bob`, { method: "PUT", headers: { authorization: "Bearer alice-token" } });
    if (put.status !== 204) throw new Error(`alice lets bob in: ${put.status}`);
    await open(bobPage, "bob-token");
    for (let i = 0; i < 40; i++) {
      await alice.fill("#text", `Day ${i}: what should we see? ${"Tell me about the old town and the river. ".repeat(2)}`);
      await alice.press("#text", "Enter");
      await bobPage.fill("#text", `Bob on day ${i}: I would add the market. ${"And a long walk by the water. ".repeat(2)}`);
      await bobPage.press("#text", "Enter");
      await post(`On day ${i}, the old town in the morning and the river at dusk. ${"Book the museum early. ".repeat(4)}`);
    }
    for (const page of [alice, bobPage]) {
      await until("an automatic divider on each page", async () => (await dividers(page, ".completed.automatic")) > 0);
      await until("the newest messages of both members", async () => {
        const texts = await page.locator("li.message").allTextContents();
        return texts.some((t) => t.startsWith("alice:") && t.includes("Day 39")) && texts.some((t) => t.startsWith("bob:") && t.includes("Bob on day 39"));
      });
    }
    const label = await alice.locator("li.divider.automatic").first().textContent();
    if (!/automatic compaction · \d+ turns folded/.test(label)) throw new Error(`a divider says what it is in text: ${label}`);
    await alice.locator("li.divider.automatic").last().scrollIntoViewIfNeeded();
    await alice.screenshot({ path: join(out, "1-automatic.png") });
  });

  await check("/compact shows progress, survives a reload mid-task, ends in a completed divider, and is never a message", async () => {
    delay = 2500;
    const before = await dividers(alice, ".completed.manual");
    await compactNow(alice);
    const status = await alice.locator("#status").textContent();
    if (!/Compacting/.test(status)) throw new Error(`progress: ${status}`);
    await alice.screenshot({ path: join(out, "2-compacting.png") });
    await alice.reload();
    await until("the task resumed after the reload", async () => (await dividers(alice, ".pending")) > 0, 5000);
    await until("the completed manual divider", async () => (await dividers(alice, ".completed.manual")) > before, 30_000);
    await until("the end in the status", async () => /Compaction completed/.test(await alice.locator("#status").textContent()));
    const texts = await alice.locator("li.message").allTextContents();
    if (texts.some((t) => t.includes("/compact"))) throw new Error("/compact appears as a message");
    const pointer = await alice.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith("foldline:task:")).length);
    if (pointer !== 0) throw new Error("the task pointer outlived its task");
    await alice.locator("li.divider.completed.manual").last().scrollIntoViewIfNeeded();
    await alice.screenshot({ path: join(out, "3-completed.png") });
  });

  await check("a server killed mid-task shows the generic failed divider after its restart", async () => {
    delay = 60_000;
    await compactNow(alice);
    server.child.kill("SIGKILL");
    await new Promise((r) => server.child.on("exit", r));
    delay = 0;
    server = await start();
    await until("the failed divider with the generic notice", async () => (await dividers(alice, ".failed")) > 0, 30_000);
    const notice = await alice.locator("li.divider.failed").first().textContent();
    if (!/could not be compacted/i.test(notice) || /provider|error:/i.test(notice)) throw new Error(`notice: ${notice}`);
    await alice.screenshot({ path: join(out, "4-failed.png") });
  });

  await check("a room member's /compact and a stranger are refused with the member-facing wording", async () => {
    const bob = bobPage;
    await bob.fill("#text", "/compact");
    await bob.press("#text", "Enter");
    await until("bob's refusal", async () => /Only the owner of this conversation can compact it/.test(await bob.locator("#status").textContent()));
    const stranger = await (await browser.newContext()).newPage();
    await open(stranger, "not-a-token");
    await stranger.fill("#text", "hello");
    await stranger.press("#text", "Enter");
    await until("the stranger's refusal", async () => /not signed in/.test(await stranger.locator("#status").textContent()));
    if ((await stranger.locator("li.message").count()) !== 0) throw new Error("a stranger sees the conversation");
    // A conversation of alice's bob was never let into: not the wording of a compaction.
    const posted = await fetch(`${server.base}/api/conversations/private/messages`, {
      method: "POST", headers: { authorization: "Bearer alice-token", "content-type": "application/json" }, body: JSON.stringify({ role: "user", content: "Just for me." }),
    });
    if (posted.status !== 201) throw new Error(`post: ${posted.status}`);
    const outside = await (await browser.newContext()).newPage();
    await outside.goto(`${server.base}/#token=bob-token&conversation=private`);
    await until("bob's refusal to read", async () => /belongs to another member, who has not let you in/.test(await outside.locator("#status").textContent()));
    if ((await outside.locator("li.message").count()) !== 0) throw new Error("bob sees a conversation he is not in");
  });

  await check("a member edits a message they sent in place, and is offered Edit on their own messages only", async () => {
    await alice.fill("#text", "We meet at the statoin at nine.");
    await alice.press("#text", "Enter");
    const mine = alice.locator("li.message", { hasText: "statoin" });
    await until("alice's message", async () => (await mine.count()) === 1);
    await mine.locator("button.edit").click();
    if ((await alice.inputValue("#text")) !== "We meet at the statoin at nine.") throw new Error("the composer does not hold the message");
    await alice.fill("#text", "We meet at the station at nine.");
    await alice.press("#text", "Enter");
    await until("the edit in place", async () => {
      const texts = await alice.locator("li.message").allTextContents();
      return texts.some((t) => t.includes("station at nine") && t.includes("(edited)")) && !texts.some((t) => t.includes("statoin"));
    });
    await until("the edit on bob's page", async () => (await bobPage.locator("li.message", { hasText: "station at nine" }).count()) === 1);
    // Edit is offered on one's own messages only (the server refuses the rest).
    if ((await bobPage.locator("li.message", { hasText: "station at nine" }).locator("button.edit").count()) !== 0) throw new Error("bob is offered an edit of alice's message");
    if ((await bobPage.locator("li.message", { hasText: "Bob on day 39" }).locator("button.edit").count()) !== 1) throw new Error("bob is not offered an edit of his own message");
    await alice.screenshot({ path: join(out, "5-edited.png") });
  });

  // The owner lets bob out while his page follows the room: his page says
  // so and shows nothing of what is written next; let back in, it follows again.
  await check("a member let out of the room sees it on the page, and nothing written after", async () => {
    const room = (method) => fetch(`${server.base}/api/conversations/trip/members/bob`, { method, headers: { authorization: "Bearer alice-token" } });
    if ((await room("DELETE")).status !== 204) throw new Error("bob was not let out");
    await alice.fill("#text", "Only for alice from now on.");
    await alice.press("#text", "Enter");
    await until("bob's page says he is out", async () => /belongs to another member, who has not let you in/.test(await bobPage.locator("#status").textContent()));
    await until("bob's page empty", async () => (await bobPage.locator("li.message").count()) === 0);
    if ((await bobPage.locator("li.message", { hasText: "Only for alice" }).count()) !== 0) throw new Error("bob saw what came after");
    if ((await room("PUT")).status !== 204) throw new Error("bob was not let back in");
    await until("bob's page following again", async () => (await bobPage.locator("li.message", { hasText: "Only for alice" }).count()) === 1, 30_000);
    await until("the refusal gone from bob's page", async () => (await bobPage.locator("#status").textContent()) === "");
  });

  await check("a long conversation opens on its latest page, shows earlier ones on request, and an idle page draws nothing", async () => {
    const say = (body) => fetch(`${server.base}/api/conversations/long/messages`, {
      method: "POST", headers: { authorization: "Bearer alice-token", "content-type": "application/json" }, body: JSON.stringify(body),
    }).then(async (r) => { if (r.status !== 201) throw new Error(`post: ${r.status} ${await r.text()}`); });
    await say(Array.from({ length: 260 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `Note ${i}.` })));
    const page = await (await browser.newContext()).newPage();
    page.on("pageerror", (e) => errors.push(String(e)));
    const drawn = [];
    page.on("response", (r) => r.url().includes("/long/timeline") && drawn.push(r.status()));
    await page.goto(`${server.base}/#token=alice-token&conversation=long`);
    const notes = async () => (await page.locator("li.message").allTextContents()).map((t) => Number(/Note (\d+)\./.exec(t)?.[1] ?? -1)).filter((n) => n >= 0);
    await until("the latest note", async () => (await notes()).includes(259));
    // Settle (the automatic check after the append may still write), then
    // stay idle: the page's long poll draws nothing while nothing is written.
    await new Promise((r) => setTimeout(r, 2500));
    const shown = await notes();
    if (shown.length > 210 || shown.includes(0)) throw new Error(`the first page shows ${shown.length} notes from ${Math.min(...shown)}`);
    if (!(await page.locator("#earlier").isVisible())) throw new Error("no way to earlier messages");
    const idle = drawn.length;
    await new Promise((r) => setTimeout(r, 4000));
    if (drawn.length !== idle) throw new Error(`an idle page fetched the timeline: ${drawn.slice(idle)}`);
    await say({ role: "assistant", content: "Note 260." });
    await until("the new note, pushed by the long poll", async () => (await notes()).includes(260), 5000);
    await page.click("#earlier");
    await until("every note after Show earlier", async () => (await notes()).includes(0));
    if (await page.locator("#earlier").isVisible()) throw new Error("Show earlier stays with nothing earlier");
    await page.screenshot({ path: join(out, "5-long.png") });
  });

  // Each message goes under an idempotency key: an answer lost on the way
  // back is sent again and written once; a send that failed for good puts
  // the text back in the composer, and Enter sends it again under its key.
  await check("a message whose answer was lost is written once, and one whose send failed stays in the composer", async () => {
    const page = await (await browser.newContext()).newPage();
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(`${server.base}/#token=alice-token&conversation=lossy`);
    await page.waitForSelector("#text", { timeout: 10_000 });
    let drop = 0, posts = 0;
    await page.route("**/api/conversations/lossy/messages", async (route) => {
      if (route.request().method() !== "POST") return route.continue();
      posts++;
      const res = await route.fetch(); // written by the server
      if (drop > 0) {
        drop--;
        return route.abort("connectionreset");
      }
      return route.fulfill({ response: res });
    });
    const stored = async (text) => {
      const r = await fetch(`${server.base}/api/conversations/lossy/timeline`, { headers: { authorization: "Bearer alice-token" } });
      return (await r.json()).items.filter((i) => i.type === "message" && i.text === text).length;
    };
    drop = 1;
    await page.fill("#text", "Is the venue booked?");
    await page.press("#text", "Enter");
    await until("the message on the page", async () => (await page.locator("li.message", { hasText: "venue booked" }).count()) === 1);
    await until("the send again after the lost answer", async () => posts === 2);
    drop = 4; // the first send and its three retries
    await page.fill("#text", "And the caterer?");
    await page.press("#text", "Enter");
    await until("the failure", async () => /Try again/.test(await page.locator("#status").textContent()));
    if ((await page.inputValue("#text")) !== "And the caterer?") throw new Error("the failed message left the composer");
    await page.press("#text", "Enter");
    await until("the message on the page", async () => (await page.locator("li.message", { hasText: "caterer" }).count()) === 1);
    await until("the send again from the composer", async () => posts === 7 && (await page.inputValue("#text")) === "");
    const counts = [await stored("Is the venue booked?"), await stored("And the caterer?")];
    if (counts.join() !== "1,1") throw new Error(`stored ${counts}`);
  });

  await check("an app on another origin calls the server through foldline/client, once the server lets its origin in", async () => {
    const use = async (origin) => {
      const page = await (await browser.newContext()).newPage();
      await page.goto(`${origin}/`);
      return page.evaluate(async (server) => {
        const { createClient } = await import("/client.js");
        const client = createClient({ baseUrl: server, token: "alice-token", conversation: "elsewhere", storage: null });
        try {
          const sent = await client.send("Written from a page of another origin.");
          const first = await client.timeline();
          const again = await client.timeline();
          const synced = await client.sync();
          const refused = await client.send("/compact").then(() => "accepted", (e) => e.code);
          return { sent: sent.kind, items: first.items.length, unchanged: again.unchanged === true, synced: synced > 0, refused };
        } catch (e) {
          return { error: String(e) };
        }
      }, server.base);
    };
    // A message sent (a preflight, then the POST), the timeline drawn and
    // asked again with its ETag (readable only when exposed: `unchanged`),
    // the events route, and a refusal read with its code.
    const allowed = await use(app.origin);
    const want = { sent: "message", items: 1, unchanged: true, synced: true, refused: "nothing_to_fold" };
    if (JSON.stringify(allowed) !== JSON.stringify(want)) throw new Error(`the allowed app got ${JSON.stringify(allowed)}, not ${JSON.stringify(want)}`);
    const other = await use(otherApp.origin);
    if (!/Failed to fetch/.test(other.error ?? "")) throw new Error(`an app the server does not let in got ${JSON.stringify(other)}`);
  });

  await check("the chat page will not load inside another site's frame", async () => {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${app.origin}/`);
    await page.evaluate((src) => new Promise((r) => {
      const frame = document.createElement("iframe");
      frame.src = src;
      frame.onload = r;
      document.body.append(frame);
      setTimeout(r, 5000);
    }), `${server.base}/#token=alice-token&conversation=trip`);
    const framed = page.frames().find((f) => f !== page.mainFrame());
    if (!framed) throw new Error("no frame");
    const shown = await framed.locator("#text").count().catch(() => 0);
    if (shown !== 0) throw new Error("the chat page loaded inside another site's frame");
  });

  await check("the page works with the keyboard and raised no script errors", async () => {
    await alice.reload();
    const path = [];
    for (let i = 0; i < 3 && path.at(-1) !== "text"; i++) {
      await alice.keyboard.press("Tab");
      path.push(await alice.evaluate(() => document.activeElement?.id || document.activeElement?.tagName));
    }
    if (path.at(-1) !== "text") throw new Error(`Tab does not reach the message field: ${path.join(" → ")}`);
    await alice.keyboard.type("Sent with the keyboard only.");
    await alice.keyboard.press("Enter");
    await until("the keyboard's message", async () => (await alice.locator("li.message").allTextContents()).some((t) => t.includes("Sent with the keyboard only.")));
    // Back one stop from the composer: the newest message's Edit (one tab
    // stop for all of them); Enter puts its text in the composer.
    await alice.focus("#text");
    await alice.keyboard.press("Shift+Tab");
    if ((await alice.evaluate(() => document.activeElement?.className)) !== "edit") throw new Error("Shift+Tab does not reach the newest message's Edit");
    await alice.keyboard.press("Enter");
    if ((await alice.inputValue("#text")) !== "Sent with the keyboard only.") throw new Error("Enter on Edit does not fill the composer");
    await alice.fill("#text", "Edited with the keyboard only.");
    await alice.keyboard.press("Enter");
    await until("the keyboard's edit", async () => (await alice.locator("li.message").allTextContents()).some((t) => t.includes("Edited with the keyboard only.") && t.includes("(edited)")));
    if (errors.length) throw new Error(errors.join("\n"));
  });
} finally {
  await browser.close();
  server.child.kill("SIGTERM");
  provider.close();
  app.s.close();
  otherApp.s.close();
  rmSync(dir, { recursive: true, force: true });
}
console.log(`chat page: ${failed ? `${failed} failed` : "all passed"} (screenshots in ${out})`);
process.exit(failed ? 1 : 0);
