// The reference chat page: messages and dividers from the server's
// timeline — the latest page of it, earlier pages on request, kept live by
// a long poll that costs nothing while the conversation is idle —
// `/compact` as a client action with its progress, a task resumed after a
// reload, a member's own messages edited in place. Built into one script by `js/scripts/build-chat.mjs`;
// `foldline serve --web` serves it. Sign in with `#token=…&conversation=…`
// in the address, or the form.
import { createClient, newSendKey, ClientError, type Client, type TaskPointer, type TimelineAnswer } from "../../src/client.js";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const list = $("timeline");
const status = $("status");
let running: TaskPointer | undefined;
// The message being edited (its turn), while the composer holds its text.
let editing: string | undefined;
// A message whose send failed, with its idempotency key: back in the
// composer, and sent again under the same key, so one the server did write
// before the connection dropped is not written twice.
let unsent: { text: string; key: string } | undefined;
// Who is signed in: Edit is offered on their own messages only.
let me: string | undefined;
// How many of the latest items the page shows; "Show earlier" adds a page.
const PAGE = 200;
let limit = PAGE;

function say(text: string): void {
  status.textContent = text;
}

function divider(kind: string, state: string, count: number, notice?: string): string {
  if (state === "failed") return notice ?? "Compaction could not finish.";
  if (state === "pending") return `${kind} compaction · in progress`;
  return `${kind} compaction · ${count} turns folded into a summary`;
}

async function render(client: Client, waitMs = 0): Promise<void> {
  const asked = limit;
  // A conversation nobody has written to yet is empty, not an error (and
  // has no tag to wait on: asked again a little later).
  const t: TimelineAnswer = await client.timeline({ limit, waitMs }).catch(async (e: unknown) => {
    if (!(e instanceof ClientError && e.code === "not_found")) throw e;
    if (waitMs > 0) await new Promise((r) => setTimeout(r, 1500));
    return { items: [] };
  });
  // A long poll that ended with nothing new leaves the page as it is, and
  // one asked before "Show earlier" leaves it to the newer answer.
  if ((t.unchanged && waitMs > 0) || asked !== limit) return;
  $("earlier").hidden = t.earlier === undefined;
  const items = t.items.map((i) => {
    const li = document.createElement("li");
    if (i.type === "divider") {
      li.className = `divider ${String(i.state)} ${String(i.kind)}`;
      li.dataset.state = String(i.state);
      li.dataset.kind = String(i.kind);
      li.textContent = divider(String(i.kind), String(i.state), Number(i.count ?? 0), i.notice as string | undefined);
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
      if (i.role === "user" && me !== undefined && i.sender === me) {
        // The server lets a member edit only what they sent.
        const edit = document.createElement("button");
        edit.type = "button";
        edit.className = "edit";
        edit.textContent = "Edit";
        edit.setAttribute("aria-label", "Edit this message");
        edit.dataset.turn = String(i.turnId);
        edit.dataset.text = String(i.text);
        // One tab stop for all of them (the newest; arrow keys move among
        // them), so Tab still reaches the composer at once.
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
  const edits = list.querySelectorAll<HTMLButtonElement>("button.edit");
  if (edits.length > 0) edits[edits.length - 1].tabIndex = 0;
  // At the bottom, stay there; else keep what was in view where it was
  // (earlier items added above it).
  list.scrollTop = atBottom ? list.scrollHeight : list.scrollHeight - fromBottom;
}

/** Follow the conversation: each answer comes when something was written. */
async function live(client: Client): Promise<void> {
  let out = false;
  for (;;) {
    try {
      await render(client, 25_000);
      if (out) say("");
      out = false;
    } catch (e) {
      // Refused (let out of the room, the token revoked): say so, and
      // show nothing more of the conversation; asked again in case the
      // member is let back in. The server away: try again.
      if (e instanceof ClientError && (e.code === "not_owner" || e.code === "unauthorized")) {
        say(e.memberMessage);
        list.replaceChildren();
        out = true;
      }
      await new Promise((r) => setTimeout(r, 1500));
    }
  }
}

async function follow(client: Client, task: TaskPointer): Promise<void> {
  running = task;
  say("Compacting… requested");
  await render(client);
  const end = await client.follow(task, (e) => say(e.state === "requested" ? "Compacting… requested" : ""));
  running = undefined;
  say(end.state === "completed" ? "Compaction completed." : end.notice ?? "");
  await render(client);
}

function start(token: string, conversation: string): void {
  $("who").textContent = `conversation ${conversation}`;
  const client = createClient({ baseUrl: location.origin, token, conversation });
  $<HTMLFormElement>("compose").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const input = $<HTMLInputElement>("text");
    const text = input.value;
    if (!text.trim()) return;
    input.value = "";
    const turn = editing;
    const key = unsent?.text === text ? unsent.key : newSendKey();
    try {
      say("");
      if (turn !== undefined) {
        editing = undefined;
        await client.edit(turn, text);
        await render(client);
        return;
      }
      unsent = { text, key };
      const sent = await client.send(text, { idempotencyKey: key });
      unsent = undefined;
      if (sent.kind === "compact") await follow(client, sent.task);
      else await render(client);
    } catch (e) {
      // Nothing the member typed is lost: the text goes back to the
      // composer (an edit stays an edit), Enter sends it again.
      if (!input.value) {
        input.value = text;
        editing = turn;
      }
      say(e instanceof ClientError ? e.memberMessage : "Something went wrong. Try again.");
    }
  });
  // Edit: the message's text into the composer; Enter saves, Escape cancels.
  list.addEventListener("click", (ev) => {
    const edit = (ev.target as HTMLElement).closest<HTMLButtonElement>("button.edit");
    if (!edit) return;
    editing = edit.dataset.turn;
    const input = $<HTMLInputElement>("text");
    input.value = edit.dataset.text ?? "";
    input.focus();
    say("Editing your message: Enter saves, Escape cancels.");
  });
  list.addEventListener("keydown", (ev) => {
    const at = (ev.target as HTMLElement).closest<HTMLButtonElement>("button.edit");
    if (!at || (ev.key !== "ArrowUp" && ev.key !== "ArrowDown")) return;
    const edits = [...list.querySelectorAll<HTMLButtonElement>("button.edit")];
    const next = edits[edits.indexOf(at) + (ev.key === "ArrowUp" ? -1 : 1)];
    if (!next) return;
    ev.preventDefault();
    at.tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
  });
  $("text").addEventListener("keydown", (ev) => {
    if (ev.key !== "Escape" || editing === undefined) return;
    editing = undefined;
    $<HTMLInputElement>("text").value = "";
    say("");
  });
  $("earlier").addEventListener("click", () => {
    limit += PAGE;
    render(client).catch((e) => say(e instanceof ClientError ? e.memberMessage : String(e)));
  });
  const pending = client.pending();
  client.me()
    .then((id) => { me = id; })
    .catch(() => undefined)
    .then(() => (pending ? follow(client, pending) : render(client)))
    .catch((e) => say(e instanceof ClientError ? e.memberMessage : String(e)))
    // Messages of the room and dividers of automatic compactions appear as
    // the server writes them.
    .finally(() => void live(client));
}

const params = new URLSearchParams(location.hash.slice(1));
const token = params.get("token");
if (token) start(token, params.get("conversation") ?? "chat");
else {
  $("signin").hidden = false;
  $<HTMLFormElement>("signin-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    $("signin").hidden = true;
    start($<HTMLInputElement>("token").value, $<HTMLInputElement>("conversation").value);
  });
}
