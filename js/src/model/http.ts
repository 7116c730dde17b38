// What the OpenAI-protocol adapters share: the request, the typed HTTP
// failure, and the `data:` lines of a server-sent-event stream.

import { ModelError } from "./model.js";

/** POST `body` as JSON to `baseUrl` + `path`, with the bearer key when there is one. */
export function post(o: { baseUrl: string; apiKey?: string; fetch?: typeof fetch }, path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (o.apiKey) headers.authorization = `Bearer ${o.apiKey}`;
  return (o.fetch ?? fetch)(`${o.baseUrl.replace(/\/$/, "")}${path}`, { method: "POST", headers, body: JSON.stringify(body), signal });
}

/** A provider's HTTP failure, typed: 402/429 are budget stops, other 4xx refusals, 408/504 timeouts. */
export function httpError(status: number, body: string): ModelError {
  const kind = status === 402 || status === 429 ? "budgetStop" : status === 408 || status === 504 ? "timeout" : status >= 400 && status < 500 ? "providerRefusal" : "other";
  return new ModelError(kind, `provider answered HTTP ${status}: ${body}`);
}

/** The answer's body, or its failure typed by status. */
export async function ok(res: Response): Promise<ReadableStream<Uint8Array<ArrayBuffer>>> {
  if (!res.ok || !res.body) throw httpError(res.status, res.ok ? "no body" : (await res.text()).slice(0, 500));
  return res.body;
}

/** The `data:` payloads of a server-sent-event stream, in order. */
export async function* dataLines(body: ReadableStream<Uint8Array<ArrayBuffer>>): AsyncIterable<string> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line.startsWith("data:")) yield line.slice(5).trim();
    }
  }
}

/**
 * The summary's own output tokens: a reasoning model's usage counts its
 * reasoning among them (`completion_tokens_details` of a chat completion,
 * `output_tokens_details` of a response), which the summary's cap (`settle`
 * refuses a summary over `maxTokens`) is not about. host-wasmtime's
 * `model/http.rs` `summary_tokens` is its twin.
 */
export function summaryTokens(output: number | undefined, reasoning: number | undefined): number {
  return Math.max(0, (output ?? 0) - (reasoning ?? 0));
}

/**
 * A finish that cut the summary short other than at its cap (which `settle`
 * refuses as `summary_truncated`), as a model failure: a content filter's
 * stop (`content_filter`, the AI SDK's `content-filter`; a response
 * `incomplete` for it) and a response `cancelled` or an AI SDK `error` leave
 * a partial summary that would otherwise settle as whole, and the facts
 * after the cut would be lost with the turns it covers. host-wasmtime's
 * `model/http.rs` `cut_short` is its twin.
 */
export function cutShort(finish: string): ModelError | undefined {
  const kind = finish === "content_filter" || finish === "content-filter" ? "providerRefusal"
    : finish === "incomplete" || finish === "cancelled" || finish === "error" ? "other"
    : undefined;
  return kind && new ModelError(kind, `the provider cut the summary short: finish reason \`${finish}\``);
}
