// What a compactor or a handler is built with, checked when it is built: a
// missing or mistyped option throws `invalid_request` naming it — never a
// TypeError from inside the first message, or a silent default.

import { FoldlineError } from "./error.js";

/** The methods a journal must have (`readEventsPage`, `noteSkipped` and `progress` are optional). */
const JOURNAL = ["readEvents", "append", "putPacket", "getPacket", "listPackets", "acquireLease", "releaseLease"];
/** The methods a model must have. */
const MODEL = ["stream", "complete"];
/** Options that are functions when given. */
const FUNCTIONS = ["route", "owner", "audit", "countTokens"];
/** The fields of member compression's availability (`compression`), each a boolean. */
const AVAILABILITY = ["surface", "toolResult", "plainSpeak", "promptTrim"];
/** Options that are whole numbers, at least 0, when given. */
const COUNTS = [
  "leaseMs", "conversationsKept", "timelineTextChars", "timelinePageItems", "modelTimeoutMs", "warmLeaseMs", "messageOverheadTokens",
  "bodyLimit", "condensePerMinute", "answerLeaseMs", "pollMs",
];

function refuse(who: string, message: string): never {
  throw new FoldlineError({ code: "invalid_request", message: `${who}: ${message}` });
}

/** The first of `methods` that `v` lacks as a function, if any. */
function lacking(v: unknown, methods: string[]): string | undefined {
  if (typeof v !== "object" || v === null) return methods[0];
  return methods.find((m) => typeof (v as Record<string, unknown>)[m] !== "function");
}

/**
 * Check the options `who` (`createCompactor`, `createHandler`) is built
 * with: a journal and a model with their methods, a declaration object
 * (its rules are the core's to check), and the type of each optional one.
 */
export function checkOptions(who: string, o: unknown): void {
  if (typeof o !== "object" || o === null) refuse(who, "options are needed: { journal, model, declaration }");
  const r = o as Record<string, unknown>;
  const j = lacking(r.journal, JOURNAL);
  if (j) refuse(who, `journal must be a Journal (MemoryJournal, IndexedDbJournal or one of your own): it has no ${j}()`);
  const m = lacking(r.model, MODEL);
  if (m) refuse(who, `model must be a Model (modelFromFunction, modelFromAiSdk, OpenAiCompatibleModel, OpenAiResponsesModel or one of your own): it has no ${m}()`);
  if (typeof r.declaration !== "object" || r.declaration === null || Array.isArray(r.declaration)) {
    refuse(who, "declaration must be an object: { targetId, compactorId, … }");
  }
  for (const k of FUNCTIONS) {
    if (r[k] !== undefined && typeof r[k] !== "function") refuse(who, `${k} must be a function`);
  }
  for (const k of COUNTS) {
    const v = r[k];
    if (v !== undefined && !(Number.isSafeInteger(v) && (v as number) >= 0)) refuse(who, `${k} must be a whole number, at least 0 (got ${JSON.stringify(v)})`);
  }
  const c = r.compression;
  if (c !== undefined) {
    const fields = "{ surface, toolResult, plainSpeak, promptTrim }, each true or false";
    if (typeof c !== "object" || c === null || Array.isArray(c)) refuse(who, `compression must be an object: ${fields}`);
    for (const [k, v] of Object.entries(c)) {
      if (!AVAILABILITY.includes(k) || typeof v !== "boolean") refuse(who, `compression.${k}: ${fields}`);
    }
  }
}

/** A handler's members, checked as `foldline serve` checks its members file. */
export function checkMembers(members: unknown): void {
  const who = "createHandler";
  if (!Array.isArray(members)) refuse(who, "members must be an array of { id, tokenSha256 }");
  if (members.length === 0) refuse(who, "no members, so no request could ever be served");
  const seen = new Set<string>();
  for (const m of members as Array<Record<string, unknown> | null>) {
    const id = m?.id;
    if (typeof id !== "string" || id === "" || seen.has(id)) refuse(who, `member id ${JSON.stringify(id)} is empty, not a string or repeated`);
    seen.add(id);
    if (typeof m?.tokenSha256 !== "string" || !/^[0-9a-f]{64}$/.test(m.tokenSha256)) {
      refuse(who, `member ${JSON.stringify(id)}: tokenSha256 must be 64 lowercase hex digits (the SHA-256 of the token)`);
    }
  }
}
