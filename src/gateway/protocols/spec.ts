import type { TSchema } from "@sinclair/typebox";
import type { ErrorFamily } from "../../http/errors";
import type { CredentialStyle } from "../../http/surfaces";
import type { Success } from "../../openapi/declare";

/**
 * Everything the gateway knows about one wire protocol, in one typed value. Routing,
 * authentication, forwarding, streaming and metering read these fields; none of them
 * switches on a protocol's name. There is no translation layer: a request goes upstream
 * in the protocol it arrived in, so a spec only says where usage sits, how a stream ends
 * and how an error is written, never how to convert a body.
 */
export interface ProtocolSpec<N extends string = string> {
  /** Wire-protocol name: what providers list in `serves` and usage rows carry as `surface`. */
  readonly name: N;
  /** Human name in errors ("model 'x' is not available on the <label> protocol"). */
  readonly label: string;
  /** How requests arrive (paths, body schema, model location, OpenAPI text). */
  readonly route: ProtocolRoute;
  /**
   * Path prefixes (optionally narrowed by a pattern) that authenticate and render errors
   * as this protocol does; see `Surface` in src/http/surfaces.ts.
   */
  readonly surfaces: readonly { prefix: string; pattern?: RegExp; header?: string }[];
  /** Where the API key is read from (spec: Authentication, credential locations). */
  readonly credentials: CredentialStyle;
  /** Error body shape before a stream has started (spec: Errors). */
  readonly errorFamily: ErrorFamily;
  /** Status of a refusal for a key past its spending limit (spec: 402, 403 on protocol surfaces). */
  readonly spendLimitStatus: 402 | 403;
  /**
   * Bodies go upstream as sent and are never stored, so strings the database could not
   * store (NUL, lone surrogates) are let through.
   */
  readonly passThrough: boolean;
  /** Usage, stream end and in-stream errors. */
  readonly codec: ProtocolCodec;
  /**
   * Fields to add to a request so the upstream reports usage the client did not ask for
   * (undefined when nothing is needed). The codec drops the event carrying that usage
   * again on its way back, so the client sees the stream it asked for.
   */
  forceUsage?(body: Record<string, unknown>): Record<string, unknown> | undefined;
  /**
   * An event sent to the client after upstream silence (`pingIntervalMs`), between
   * events only; absent for protocols that define no keep-alive event.
   */
  readonly ping?: Uint8Array;
  /**
   * `binary`: a successful answer is a file (speech audio), passed through to the client
   * chunk by chunk, never read as text; usage comes from the request (`Call.usage`).
   */
  readonly answer?: "binary";
  /** The surface's POST bodies may be multipart uploads, read by the route as a stream (files); multipart routes are so anyway. */
  readonly uploads?: boolean;
}

export type ProtocolRoute = ModelInBodyRoute | ModelInPathRoute | ResourceRoute | MultipartRoute | WebSocketRoute;

interface RouteDocs {
  summary: string;
  description: string;
  /**
   * The successful answer for the OpenAPI document (declared, not enforced: the body passes
   * through as the provider sent it) and the error statuses beyond the surface's common ones.
   */
  success: Success;
  errors: readonly number[];
}

/** `POST <path>` with a JSON body naming the model; `stream: true` in the body streams. */
export interface ModelInBodyRoute extends RouteDocs {
  kind: "model-in-body";
  path: string;
  operationId: string;
  body: TSchema;
  /** Checks beyond the schema (e.g. system prompt length); throws an ApiError. */
  check?(body: any): void;
}

/**
 * `POST {version}/models/{model}:{action}` under each generative-vendor API version;
 * the action says whether the answer streams.
 */
export interface ModelInPathRoute extends RouteDocs {
  kind: "model-in-path";
  /** Each action is its own operation in the document, with the action as its id. */
  actions: Readonly<Record<string, { stream: boolean }>>;
  body: TSchema;
  check?(body: any): void;
}

/**
 * `POST <path>` with a multipart/form-data body (a file upload) naming the model in its
 * `model` field. The body is never parsed whole: it is written to a spool file as it
 * arrives (src/gateway/upload.ts), the small fields read on the way, and each candidate
 * is sent the spooled bytes, so a fallback can send them again.
 */
export interface MultipartRoute extends RouteDocs {
  kind: "multipart";
  path: string;
  operationId: string;
  /** The form's fields for the OpenAPI document (declared; the parts pass through unchecked). */
  form: TSchema;
  /** The model when the form has no `model` field (undefined: the field is required). */
  defaultModel?: string;
}

/**
 * `GET <path>?model=...` upgraded to a WebSocket whose frames are relayed to the provider's
 * own WebSocket as they come (src/gateway/realtime.ts); usage is read from the events that
 * report it (`ProtocolCodec.usageFromBody` on each such event's JSON).
 */
export interface WebSocketRoute {
  kind: "websocket";
  path: string;
}
/**
 * A resource API with routes of its own (Interactions: create, then read by id), mounted
 * by src/gateway/routes.ts; the spec still supplies everything else.
 */
export interface ResourceRoute {
  kind: "resource";
  body: TSchema;
}

/**
 * One request's usage as the vendor bills it, whatever the protocol. `inputTokens` is
 * every prompt token (cache reads and cache writes included: Anthropic reports those
 * apart from `input_tokens`, and its reader adds them), `outputTokens` every generated
 * token (reasoning included); the other counts are parts of those two, priced at their
 * own rates (src/catalog/pricing.ts). A part the vendor did not report is left unset.
 */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Input tokens read from the provider's prompt cache. */
  cachedTokens?: number;
  /** Input tokens written to the provider's prompt cache (every TTL). */
  cacheWriteTokens?: number;
  /** Of `cacheWriteTokens`, those written with the one-hour TTL (Anthropic `ephemeral_1h`). */
  cacheWrite1hTokens?: number;
  /** Of `outputTokens`, reasoning (thinking) tokens. */
  reasoningTokens?: number;
  /** Of `inputTokens` / `outputTokens`, audio tokens. */
  inputAudioTokens?: number;
  outputAudioTokens?: number;
  /**
   * The counts are the gateway's estimate, not the vendor's report: a stream that ended
   * before its usage arrived (the client went away, the upstream failed).
   */
  estimated?: boolean;
  /**
   * Units priced per unit rather than per token (images, speech, transcription): the
   * gateway prices them from the unit prices (src/generation/pricing.ts) where it knows
   * the model's, and the catalog prices the tokens otherwise.
   */
  images?: number;
  /** Seconds of audio transcribed or translated. */
  audioSeconds?: number;
  /** Characters of text spoken. */
  characters?: number;
}

export interface StreamEvent {
  /** `event:` field, "" when absent. */
  name: string;
  /** Joined `data:` lines. */
  data: string;
}

export interface ProtocolCodec {
  /** Usage from a complete non-streamed JSON response. */
  usageFromBody(json: any, usage: Usage): void;
  /**
   * Looks at one stream event: updates usage, reports whether the stream is complete,
   * and whether it is a usage-only chunk the client did not ask for (dropped when `strip`).
   * Cheap substring checks come first so most events are never parsed.
   */
  onEvent(ev: StreamEvent, usage: Usage, strip: boolean): { drop?: boolean; terminal?: boolean } | undefined;
  /**
   * Substrings an event's raw text must contain for `onEvent` to care about it (usage,
   * end of stream). Other events, most of a stream, pass without being parsed.
   */
  markers: readonly string[];
  /** An error event in the protocol's own stream format. */
  errorEvent(status: number, message: string): string;
  /** Whether a stream without the protocol's final event counts as truncated. */
  hasTerminalEvent: boolean;
  /**
   * Whether nothing may follow the final event, so the client's stream can end with it
   * instead of waiting for the upstream to close its body.
   */
  lastEventIsTerminal: boolean;
}

/** A token count from JSON: anything but a finite number counts as 0. */
export const count = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** Cached input tokens, only where the upstream reported them (left unset otherwise). */
export const cached = (u: Usage, v: unknown) => {
  if (typeof v === "number" && Number.isFinite(v)) u.cachedTokens = v;
};

/** Sets one part of the usage, only where the upstream reported it (left unset otherwise). */
export function part(u: Usage, field: "cacheWriteTokens" | "cacheWrite1hTokens" | "reasoningTokens" | "inputAudioTokens" | "outputAudioTokens", v: unknown): void {
  if (typeof v === "number" && Number.isFinite(v) && v >= 0) u[field] = v;
}

/**
 * OpenAI-style usage details (chat `prompt_tokens_details` / `completion_tokens_details`,
 * Responses `input_tokens_details` / `output_tokens_details`): cache reads, reasoning, audio.
 */
export function openaiDetails(u: Usage, input: any, output: any): void {
  cached(u, input?.cached_tokens);
  part(u, "inputAudioTokens", input?.audio_tokens);
  part(u, "reasoningTokens", output?.reasoning_tokens);
  part(u, "outputAudioTokens", output?.audio_tokens);
}

/** Resets every count (a usage that must not be recorded twice). */
export function clearUsage(u: Usage): void {
  u.inputTokens = u.outputTokens = 0;
  u.cachedTokens = u.cacheWriteTokens = u.cacheWrite1hTokens = u.reasoningTokens = u.inputAudioTokens = u.outputAudioTokens = undefined;
  u.images = u.audioSeconds = u.characters = undefined;
}

/** Parsed JSON, or undefined for text that is not JSON (a malformed upstream event). */
export function parseJson(data: string): any {
  try {
    return JSON.parse(data);
  } catch {
    return undefined;
  }
}

/** Identity helper that type-checks a spec and keeps its literal name. */
export function defineProtocol<N extends string>(spec: ProtocolSpec<N>): ProtocolSpec<N> {
  return spec;
}
