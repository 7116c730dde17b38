// foldline for JavaScript: the API every platform entry shares. The entries
// (`node.ts`, `browser.ts`, `index.ts`, chosen by the package's `exports`
// conditions) add only `init`, each with its platform's way to find the
// bundled .wasm.
//
// Every call answers a typed value or throws a FoldlineError with the core's
// stable code; nothing traps.
//
// This file only re-exports (the entry points themselves are in ops.ts): no
// module of the package imports it, so importing one module never evaluates
// the whole package.

import { ARTIFACT_SHA256 } from "../pkg/artifact.js";

export type * from "./types.js";
export { createCompactor, MESSAGE_OVERHEAD_TOKENS } from "./driver.js";
export type { Compactor, CompactorOptions, RenderedSelection, OnMessageResult, ContextOptions, ManualTask, AppendMessages, AppendMessagesOptions, Appended, CorrectOptions, Corrected } from "./driver.js";
export { createHandler, MemoryAnswers, MemoryOwners, MemoryCompression, passKey, httpStatusOf } from "./handler.js";
export type { AnswerHold, Answers, FoldlineHandler, Handler, HandlerOptions, Member, Owners, ExecutionContext, CompressionStore, PassStats } from "./handler.js";
export { fromOpenAiMessages, fromOpenAiResponses, fromAnthropicMessages, fromAiSdkMessages, aiSdkPrompt } from "./convert.js";
export type { OpenAiChatMessage, OpenAiResponsesInput, AnthropicMessage, AnthropicTextBlock, AiSdkMessage, AiSdkPart } from "./convert.js";
export { modelFromFunction } from "./model/function.js";
export { modelFromAiSdk } from "./model/aisdk.js";
export type { AiSdkLanguageModel, AiSdkFunctions, AiSdkUsage } from "./model/aisdk.js";
export type { FunctionAnswer } from "./model/function.js";
export type { Journal, StoredEvent, AppendOptions, Progress } from "./journal/journal.js";
export { checkAppend, checkTurns, turnClaims } from "./journal/journal.js";
export { MemoryJournal } from "./journal/memory.js";
export { IndexedDbJournal } from "./journal/indexeddb.js";
export { D1Journal } from "./journal/d1.js";
export type { D1Like, D1StatementLike } from "./journal/d1.js";
export { D1Owners, D1Compression } from "./handler/d1.js";
export type { Model, ModelResult, StreamChunk } from "./model/model.js";
export { ModelError } from "./model/model.js";
export { OpenAiCompatibleModel } from "./model/openai.js";
export { OpenAiResponsesModel } from "./model/responses.js";
export type { OpenAiOptions } from "./model/openai.js";
export { contentHash, withContentHash, turnMeta } from "./hash.js";

/** SHA-256 of the bundled `.wasm`, `sha256:<hex>`; the wasmtime host reports the same. */
export const artifactSha256: string = ARTIFACT_SHA256;

export { FoldlineError } from "./error.js";
export type { WasmSource } from "./load.js";
export { ABI_MAJOR, MEMORY_RESET_BYTES, memoryBytes } from "./load.js";

export { version, plan, step, validate, select, timeline, trimPrompt, compressToolResult, settingsProjection, callJson } from "./ops.js";
