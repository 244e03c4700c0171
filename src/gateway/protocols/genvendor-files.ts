import { t } from "elysia";
import { GENVENDOR_STREAM_STATUS } from "./genvendor";
import { defineProtocol } from "./spec";
import { unstreamedCodec } from "./unstreamed";

/**
 * Generative-vendor files: the resumable upload protocol (`POST /upload/v1beta/files`
 * with `X-Goog-Upload-Command: start`, then the bytes to the upload URL it answers with,
 * `upload, finalize`), get, list, delete, download. A resource API with routes of its own
 * (src/gateway/genvendor-resources.ts). Not metered (the vendor does not bill storage).
 */
export const genvendorErrorEvent = (status: number, message: string) => `data: ${JSON.stringify({ error: { code: status, message, status: GENVENDOR_STREAM_STATUS[status] ?? "INTERNAL" } })}\n\n`;

export const genvendorFiles = defineProtocol({
  name: "genvendor-files",
  label: "files",
  route: { kind: "resource", body: t.Object({}, { additionalProperties: true }) },
  surfaces: [{ prefix: "/upload/v1beta/files" }, { prefix: "/v1beta/files" }, { prefix: "/download/v1beta/files" }],
  credentials: "genvendor",
  errorFamily: "genvendor",
  spendLimitStatus: 403,
  passThrough: true,
  // The upload's bytes are streamed upstream, never parsed.
  uploads: true,
  codec: unstreamedCodec(() => {}, genvendorErrorEvent),
});
