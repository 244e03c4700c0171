import type { ProtocolCodec, Usage } from "./spec";

/**
 * The codec of a protocol that never streams (embeddings, token counting): usage from
 * the JSON answer only; the stream fields are there because every codec has them.
 */
export function unstreamedCodec(usageFromBody: (json: any, usage: Usage) => void, errorEvent: ProtocolCodec["errorEvent"]): ProtocolCodec {
  return { usageFromBody, errorEvent, markers: [], hasTerminalEvent: false, lastEventIsTerminal: false, onEvent: () => undefined };
}
