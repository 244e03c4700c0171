import type { Usage } from "./protocols";

/**
 * Tokens of a request body, estimated from its size: about four bytes of JSON per token
 * for prose and code (the structure's keys and quotes count as text too). No tokenizer
 * ships with the gateway; this is used only where the vendor reported nothing.
 */
export function estimateTokens(body: string | undefined): number {
  return body ? Math.ceil(Buffer.byteLength(body) / 4) : 0;
}

/**
 * Usage of a request that was cut off (the client went away, the upstream's stream broke)
 * before the vendor reported all of it. The upstream was still asked, and bills, for the
 * prompt: the input is what the stream's first event said (Messages reports it at once)
 * or else the estimate from the request; the output at least one token per data event
 * that reached the client (each delta carries one or more). Marked estimated.
 */
export function estimateCut(usage: Usage, sent: string | undefined, events: number): void {
  if (!(usage.inputTokens > 0)) usage.inputTokens = estimateTokens(sent);
  if (events > usage.outputTokens) usage.outputTokens = events;
  usage.estimated = true;
}
