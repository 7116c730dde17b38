// The conformance runner every JS runtime shares: replay each vector through
// the string API, compare with the expected response in the canonical
// encoding, and digest all responses in vector order.

export const AREAS = ["plan", "validate", "select", "timeline", "member", "contract", "step"];

/** The canonical encoding: sorted keys, no whitespace, JSON string escaping. */
export function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") {
    const keys = Object.keys(v).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

export async function runVectors(f, vectors) {
  let passed = 0;
  const failed = [];
  const parts = [];
  for (const v of vectors) {
    const input = typeof v.raw === "string" ? v.raw : JSON.stringify(v.request);
    const out = f.callJson(v.entry, input);
    if (out === canonical(v.expected)) passed++;
    else failed.push(v.name);
    parts.push(out, "\n");
  }
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(parts.join("")));
  const hex = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
  return { passed, failed, digest: `sha256:${hex}` };
}

export function line(runtime, r) {
  return `conformance ${runtime}: ${r.passed} passed, ${r.failed.length} failed, digest ${r.digest}`;
}
