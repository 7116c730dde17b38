// src/notice.ts
var MEMBER_NOTICE = "The chat could not be compacted.";

// src/client.ts
var ClientError = class extends Error {
  constructor(code, status2, memberMessage, message) {
    super(`${code}: ${message}`);
    this.code = code;
    this.status = status2;
    this.memberMessage = memberMessage;
    this.name = "ClientError";
  }
};
var MEMBER_WORDING = {
  session_busy: "An answer is being written. Try /compact again when it has finished.",
  not_owner: "Only the owner of this conversation can compact it.",
  nothing_to_fold: "There is nothing earlier to compact yet.",
  rate_limited: "Too many /compact requests. Wait a minute and try again.",
  busy: "The conversation is being compacted right now. Try again in a moment.",
  unauthorized: "You are not signed in to this server.",
  not_author: "You can edit only your own messages."
};
var NOT_IN_ROOM_WORDING = "This conversation belongs to another member, who has not let you in.";
var FAILED_NOTICE = MEMBER_NOTICE;
var SEND_RETRIES = 3;
function newSendKey() {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(16));
  return `send-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}
function isCompactCommand(text) {
  return text.trim() === "/compact";
}
async function refused(res, compacting = false) {
  let code = "internal";
  let message = `HTTP ${res.status}`;
  try {
    const body = await res.json();
    code = body.error?.code ?? code;
    message = body.error?.message ?? message;
  } catch {
  }
  const wording = code === "not_owner" && !compacting ? NOT_IN_ROOM_WORDING : MEMBER_WORDING[code];
  throw new ClientError(code, res.status, wording ?? `Something went wrong (${code}). Try again.`, message);
}
async function put(f, url, auth, body) {
  const res = await f(url, { method: "PUT", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify(body) });
  if (res.status !== 200) return refused(res);
  return await res.json();
}
async function* taskEvents(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (; ; ) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const field = (name) => block.split("\n").find((l) => l.startsWith(`${name}:`))?.slice(name.length + 1).trim();
      const state = field("event");
      if (state !== "requested" && state !== "completed" && state !== "failed") continue;
      const data = JSON.parse(field("data") ?? "{}");
      yield { state, seq: Number(field("id") ?? 0), ...data.boundaryId ? { boundaryId: data.boundaryId } : {}, ...state === "failed" ? { notice: data.notice ?? FAILED_NOTICE } : {} };
    }
  }
}
function readPointer(storage, key) {
  const raw = storage?.getItem(key);
  if (!raw) return void 0;
  try {
    const p = JSON.parse(raw);
    return typeof p.task === "string" && typeof p.events === "string" ? p : void 0;
  } catch {
    return void 0;
  }
}
async function followTask(f, baseUrl, auth, keep, task, onEvent, signal) {
  const origin = baseUrl.replace(/\/$/, "");
  for (; ; ) {
    try {
      const res = await f(`${origin}${task.events}`, { headers: { ...auth, "last-event-id": String(task.lastSeq) }, signal });
      if (!res.ok || !res.body) return await refused(res);
      for await (const e of taskEvents(res.body)) {
        task = { ...task, lastSeq: e.seq };
        onEvent?.(e);
        if (e.state === "requested") {
          keep(task);
          continue;
        }
        keep(void 0);
        return e;
      }
    } catch (e) {
      if (e instanceof ClientError || signal?.aborted) throw e;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}
async function retried(request) {
  for (let tries = 0; ; tries++) {
    try {
      return await request();
    } catch (e) {
      if (tries >= SEND_RETRIES) throw e;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}
async function timelinePage(f, base, auth, drawn, page) {
  const q = new URLSearchParams();
  if (page.limit !== void 0) q.set("limit", String(page.limit));
  if (page.before !== void 0) q.set("before", String(page.before));
  const url = `${base}/timeline${q.toString() ? `?${q}` : ""}`;
  const held = drawn.get(url);
  if (held && page.waitMs) q.set("wait", String(Math.max(0, Math.floor(page.waitMs))));
  const res = await f(q.has("wait") ? `${base}/timeline?${q}` : url, {
    headers: held ? { ...auth, "if-none-match": held.tag } : auth
  });
  if (res.status === 304 && held) return { ...held.answer, unchanged: true };
  if (!res.ok) return refused(res);
  const answer = await res.json();
  const tag = res.headers.get("etag");
  if (tag) drawn.set(url, { tag, answer });
  return answer;
}
function createClient(o) {
  const local = [];
  const drawn = /* @__PURE__ */ new Map();
  let chain = { accepted: [], retired: [] };
  const f = o.fetch ?? ((...a) => fetch(...a));
  const storage = o.storage === void 0 ? globalThis.localStorage : o.storage ?? void 0;
  const base = `${o.baseUrl.replace(/\/$/, "")}/api/conversations/${encodeURIComponent(o.conversation)}`;
  const key = `foldline:task:${o.baseUrl}:${o.conversation}`;
  const auth = { authorization: `Bearer ${o.token}` };
  function keep(p) {
    if (!storage) return;
    if (p) storage.setItem(key, JSON.stringify(p));
    else storage.removeItem(key);
  }
  async function compact() {
    const res = await f(`${base}/condense`, { method: "POST", headers: auth });
    if (res.status !== 202) return refused(res, true);
    const body = await res.json();
    const p = { task: body.task, events: body.events, lastSeq: 0 };
    keep(p);
    return p;
  }
  return {
    async send(text, options = {}) {
      if (isCompactCommand(text)) return { kind: "compact", task: await compact() };
      const init = {
        method: "POST",
        headers: { ...auth, "content-type": "application/json", "idempotency-key": options.idempotencyKey ?? newSendKey() },
        body: JSON.stringify({ role: "user", content: text })
      };
      const res = await retried(() => f(`${base}/messages`, init));
      if (res.status !== 201) return refused(res);
      const body = await res.json();
      return { kind: "message", appended: body.appended ?? 1 };
    },
    compact,
    edit: (turnId, text) => put(f, `${base}/messages/${encodeURIComponent(turnId)}`, auth, { content: text }),
    async me() {
      const res = await f(`${o.baseUrl.replace(/\/$/, "")}/api/members/me`, { headers: auth });
      if (res.status !== 200) return refused(res);
      return (await res.json()).id;
    },
    pending: () => readPointer(storage, key),
    follow: (task, onEvent, signal) => followTask(f, o.baseUrl, auth, keep, task, onEvent, signal),
    timeline: (page = {}) => timelinePage(f, base, auth, drawn, page),
    async sync(waitMs = 0) {
      let taken = 0;
      for (let wait = Math.max(0, Math.floor(waitMs)); ; wait = 0) {
        const after = local.at(-1)?.seq ?? 0;
        const res = await f(`${base}/events?after=${after}&wait=${wait}`, { headers: auth });
        if (!res.ok) return refused(res);
        const body = await res.json();
        const fresh = body.events.filter((e) => e.seq > after);
        local.push(...fresh);
        taken += fresh.length;
        chain = { accepted: body.accepted ?? chain.accepted, retired: body.retired ?? chain.retired };
        if (!body.more || fresh.length === 0) return taken;
      }
    },
    events() {
      return local;
    },
    localTimeline(page) {
      if (!o.project) throw new TypeError("createClient: localTimeline needs the `project` option (the core's timeline)");
      return o.project(local.map((e) => e.event), chain.accepted, chain.retired, page);
    }
  };
}

// examples/chat/chat.ts
var $ = (id) => document.getElementById(id);
var list = $("timeline");
var status = $("status");
var running;
var editing;
var unsent;
var me;
var PAGE = 200;
var limit = PAGE;
function say(text) {
  status.textContent = text;
}
function divider(kind, state, count, notice) {
  if (state === "failed") return notice ?? "Compaction could not finish.";
  if (state === "pending") return `${kind} compaction \xB7 in progress`;
  return `${kind} compaction \xB7 ${count} turns folded into a summary`;
}
async function render(client, waitMs = 0) {
  const asked = limit;
  const t = await client.timeline({ limit, waitMs }).catch(async (e) => {
    if (!(e instanceof ClientError && e.code === "not_found")) throw e;
    if (waitMs > 0) await new Promise((r) => setTimeout(r, 1500));
    return { items: [] };
  });
  if (t.unchanged && waitMs > 0 || asked !== limit) return;
  $("earlier").hidden = t.earlier === void 0;
  const items = t.items.map((i) => {
    const li = document.createElement("li");
    if (i.type === "divider") {
      li.className = `divider ${String(i.state)} ${String(i.kind)}`;
      li.dataset.state = String(i.state);
      li.dataset.kind = String(i.kind);
      li.textContent = divider(String(i.kind), String(i.state), Number(i.count ?? 0), i.notice);
    } else {
      li.className = `message ${String(i.role)}`;
      const role = document.createElement("span");
      role.className = "role";
      role.textContent = i.sender && i.role === "user" ? `${String(i.sender)}:` : `${String(i.role)}:`;
      li.append(role, document.createTextNode(String(i.text)));
      if (i.corrected) {
        const mark = document.createElement("span");
        mark.className = "edited";
        mark.textContent = " (edited)";
        li.append(mark);
      }
      if (i.role === "user" && me !== void 0 && i.sender === me) {
        const edit = document.createElement("button");
        edit.type = "button";
        edit.className = "edit";
        edit.textContent = "Edit";
        edit.setAttribute("aria-label", "Edit this message");
        edit.dataset.turn = String(i.turnId);
        edit.dataset.text = String(i.text);
        edit.tabIndex = -1;
        li.append(edit);
      }
    }
    return li;
  });
  if (running) {
    const li = document.createElement("li");
    li.className = "divider pending manual";
    li.dataset.state = "pending";
    li.textContent = divider("manual", "pending", 0);
    items.push(li);
  }
  const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 40;
  const fromBottom = list.scrollHeight - list.scrollTop;
  list.replaceChildren(...items);
  const edits = list.querySelectorAll("button.edit");
  if (edits.length > 0) edits[edits.length - 1].tabIndex = 0;
  list.scrollTop = atBottom ? list.scrollHeight : list.scrollHeight - fromBottom;
}
async function live(client) {
  let out = false;
  for (; ; ) {
    try {
      await render(client, 25e3);
      if (out) say("");
      out = false;
    } catch (e) {
      if (e instanceof ClientError && (e.code === "not_owner" || e.code === "unauthorized")) {
        say(e.memberMessage);
        list.replaceChildren();
        out = true;
      }
      await new Promise((r) => setTimeout(r, 1500));
    }
  }
}
async function follow(client, task) {
  running = task;
  say("Compacting\u2026 requested");
  await render(client);
  const end = await client.follow(task, (e) => say(e.state === "requested" ? "Compacting\u2026 requested" : ""));
  running = void 0;
  say(end.state === "completed" ? "Compaction completed." : end.notice ?? "");
  await render(client);
}
function start(token2, conversation) {
  $("who").textContent = `conversation ${conversation}`;
  const client = createClient({ baseUrl: location.origin, token: token2, conversation });
  $("compose").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const input = $("text");
    const text = input.value;
    if (!text.trim()) return;
    input.value = "";
    const turn = editing;
    const key = unsent?.text === text ? unsent.key : newSendKey();
    try {
      say("");
      if (turn !== void 0) {
        editing = void 0;
        await client.edit(turn, text);
        await render(client);
        return;
      }
      unsent = { text, key };
      const sent = await client.send(text, { idempotencyKey: key });
      unsent = void 0;
      if (sent.kind === "compact") await follow(client, sent.task);
      else await render(client);
    } catch (e) {
      if (!input.value) {
        input.value = text;
        editing = turn;
      }
      say(e instanceof ClientError ? e.memberMessage : "Something went wrong. Try again.");
    }
  });
  list.addEventListener("click", (ev) => {
    const edit = ev.target.closest("button.edit");
    if (!edit) return;
    editing = edit.dataset.turn;
    const input = $("text");
    input.value = edit.dataset.text ?? "";
    input.focus();
    say("Editing your message: Enter saves, Escape cancels.");
  });
  list.addEventListener("keydown", (ev) => {
    const at = ev.target.closest("button.edit");
    if (!at || ev.key !== "ArrowUp" && ev.key !== "ArrowDown") return;
    const edits = [...list.querySelectorAll("button.edit")];
    const next = edits[edits.indexOf(at) + (ev.key === "ArrowUp" ? -1 : 1)];
    if (!next) return;
    ev.preventDefault();
    at.tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
  });
  $("text").addEventListener("keydown", (ev) => {
    if (ev.key !== "Escape" || editing === void 0) return;
    editing = void 0;
    $("text").value = "";
    say("");
  });
  $("earlier").addEventListener("click", () => {
    limit += PAGE;
    render(client).catch((e) => say(e instanceof ClientError ? e.memberMessage : String(e)));
  });
  const pending = client.pending();
  client.me().then((id) => {
    me = id;
  }).catch(() => void 0).then(() => pending ? follow(client, pending) : render(client)).catch((e) => say(e instanceof ClientError ? e.memberMessage : String(e))).finally(() => void live(client));
}
var params = new URLSearchParams(location.hash.slice(1));
var token = params.get("token");
if (token) start(token, params.get("conversation") ?? "chat");
else {
  $("signin").hidden = false;
  $("signin-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    $("signin").hidden = true;
    start($("token").value, $("conversation").value);
  });
}
