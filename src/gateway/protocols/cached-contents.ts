import { t } from "elysia";
import { genvendorErrorEvent } from "./genvendor-files";
import { defineProtocol } from "./spec";
import { unstreamedCodec } from "./unstreamed";

/**
 * Generative-vendor cached contents: create, get, list, patch (TTL), delete under
 * `/v1beta/cachedContents`. A resource API with routes of its own
 * (src/gateway/genvendor-resources.ts): a cache lives at the provider its model routes
 * to, and a generateContent naming it (`cachedContent`) goes to that provider only.
 */
export const CachedContentBody = t.Object({ model: t.String({ minLength: 1, maxLength: 300, error: "model is required" }) }, { additionalProperties: true });

export const cachedContents = defineProtocol({
  name: "cached-contents",
  label: "cached contents",
  route: { kind: "resource", body: CachedContentBody },
  surfaces: [{ prefix: "/v1beta/cachedContents" }],
  credentials: "genvendor",
  errorFamily: "genvendor",
  spendLimitStatus: 403,
  passThrough: true,
  codec: unstreamedCodec(() => {}, genvendorErrorEvent),
});
