import { t } from "elysia";
import { msgvendorErrorEvent } from "./message-batches";
import { defineProtocol } from "./spec";
import { unstreamedCodec } from "./unstreamed";

/**
 * Files (Anthropic style, beta): upload (multipart, streamed through), list, retrieve
 * metadata, download, delete at `/v1/files`, the path OpenAI's files use too: a request
 * carrying `anthropic-version` (which the vendor's SDK always sends) is this protocol's
 * (src/gateway/msgvendor-resources.ts), any other OpenAI's. Not metered.
 */
export const msgvendorFiles = defineProtocol({
  name: "msgvendor-files",
  label: "files",
  route: { kind: "resource", body: t.Object({}, { additionalProperties: true }) },
  surfaces: [{ prefix: "/v1/files", header: "anthropic-version" }],
  credentials: "messages",
  errorFamily: "messages",
  spendLimitStatus: 403,
  passThrough: true,
  uploads: true,
  codec: unstreamedCodec(() => {}, msgvendorErrorEvent),
});
