import type { Surface } from "../../http/surfaces";
import { batchEmbedContents } from "./batch-embed-contents";
import { batches } from "./batches";
import { chat } from "./chat";
import { countTokens } from "./count-tokens";
import { embedContent } from "./embed-content";
import { embeddings } from "./embeddings";
import { files } from "./files";
import { generateContent } from "./generate-content";
import { imageEdits } from "./image-edits";
import { images } from "./images";
import { moderations } from "./moderations";
import { realtime } from "./realtime";
import { speech } from "./speech";
import { transcriptions } from "./transcriptions";
import { translations } from "./translations";
import { genvendorCountTokens } from "./genvendor-count-tokens";
import { interactions } from "./interactions";
import { messages } from "./messages";
import { responses } from "./responses";
import { messageBatches } from "./message-batches";
import { msgvendorFiles } from "./msgvendor-files";
import { genvendorFiles } from "./genvendor-files";
import { cachedContents } from "./cached-contents";
import { genvendorBatches } from "./genvendor-batches";
import type { ProtocolSpec } from "./spec";

export type { ProtocolCodec, ProtocolRoute, ProtocolSpec, StreamEvent, Usage } from "./spec";
export { defineProtocol } from "./spec";

/**
 * The wire protocols the gateway serves, one module each; adding a protocol is its
 * module plus one line here. The order is the order `Router.protocolsOf` lists them in.
 */
export const PROTOCOL_SPECS = [chat, messages, responses, generateContent, interactions, embeddings, countTokens, embedContent, batchEmbedContents, genvendorCountTokens, images, imageEdits, speech, transcriptions, translations, moderations, files, batches, messageBatches, msgvendorFiles, genvendorFiles, cachedContents, genvendorBatches, realtime] as const;

/** Wire protocols of the model surfaces (one per surface family, named after the surface). */
export type Protocol = (typeof PROTOCOL_SPECS)[number]["name"];

export const PROTOCOLS: readonly Protocol[] = PROTOCOL_SPECS.map((s) => s.name);

/** Built once: the data path looks a spec up by name without allocating. */
const BY_NAME = Object.fromEntries(PROTOCOL_SPECS.map((s) => [s.name, s])) as { readonly [P in Protocol]: ProtocolSpec<P> };

export function protocolSpec<P extends Protocol>(name: P): ProtocolSpec<P> {
  return BY_NAME[name];
}

/** A spec's surfaces as the HTTP layer declares them (authentication, errors, spending limit, rate limit). */
export function surfacesOf(spec: ProtocolSpec): Surface[] {
  return spec.surfaces.map(({ prefix, pattern, header }) => ({
    prefix,
    ...(pattern ? { pattern } : {}),
    ...(header ? { header } : {}),
    family: spec.errorFamily,
    credentials: spec.credentials,
    scope: "models",
    spendLimitStatus: spec.spendLimitStatus,
    // forward.ts, batch-metering.ts and the uploads enter the request's id where a stream outlives the handler.
    marksDetachedWork: true,
    ...(spec.passThrough ? { passThrough: true } : {}),
    ...(spec.route.kind === "multipart" || spec.uploads ? { streamedBody: true } : {}),
  }));
}
