import { t } from "elysia";
import { named } from "../../openapi/declare";
import { ApiError } from "../../http/errors";
import { open } from "../schemas";
import { genvendorError } from "./embed-content";
import { defineProtocol } from "./spec";
import { unstreamedCodec } from "./unstreamed";

/**
 * Token counting (Gemini style): `POST {version}/models/{model}:countTokens`, with
 * `contents` or a whole `generateContentRequest`. Not billed.
 */
const CountTokensBody = named(
  "CountTokensRequest",
  t.Object(
  { contents: t.Optional(t.Array(t.Object({}, open))), generateContentRequest: t.Optional(t.Object({}, open)) },
  { ...open, description: "countTokens request: `contents`, or `generateContentRequest`" },
  ),
);

export const GenvendorCountTokensResponse = named("CountTokensResponse", t.Object({ totalTokens: t.Integer() }, open));

export const genvendorCountTokens = defineProtocol({
  name: "countTokens",
  label: "countTokens",
  route: {
    kind: "model-in-path",
    actions: { countTokens: { stream: false } },
    body: CountTokensBody,
    success: GenvendorCountTokensResponse,
    errors: [404, 501, 502, 503, 504],
    check(body: { contents?: unknown; generateContentRequest?: unknown }) {
      if (body.contents === undefined && body.generateContentRequest === undefined) throw new ApiError(400, "countTokens needs `contents` or `generateContentRequest`");
    },
    summary: "countTokens",
    description: "Counts the tokens of contents at a provider that serves it natively: `{model}:countTokens`. Not billed.",
  },
  surfaces: [
    { prefix: "/v1beta/models", pattern: /^\/v1beta\/models\/[^/]+:countTokens$/ },
    { prefix: "/v1/models", pattern: /^\/v1\/models\/[^/]+:countTokens$/ },
  ],
  credentials: "genvendor",
  errorFamily: "genvendor",
  spendLimitStatus: 403,
  passThrough: true,
  // Nothing is billed for counting: the meter sees no tokens.
  codec: unstreamedCodec(() => {}, genvendorError),
});
