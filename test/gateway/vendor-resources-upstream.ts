/**
 * A small upstream serving the resource APIs aimock does not: Anthropic-style message
 * batches (create, retrieve, list, results as JSONL, cancel, delete) and the generative
 * vendor's resumable file uploads, files, cached contents, generateContent and batches
 * (batchGenerateContent, get, cancel, delete). Every request is recorded (method, path,
 * headers, body) so a test can tell what reached it. Each batch request is answered with
 * USAGE tokens; a batch is finished on its first read after the create.
 */
export const USAGE = { input: 100, output: 50 };

export interface SeenRequest {
  method: string;
  path: string;
  query: string;
  headers: Headers;
  body: string;
}

export interface VendorResourcesUpstream {
  url: string;
  requests: SeenRequest[];
  /** Bytes received per finished upload, by file name. */
  uploads: Map<string, Uint8Array>;
  stop(): Promise<void>;
}

const json = (v: unknown, init: ResponseInit = {}) => Response.json(v, init);
const notFound = (anthropic: boolean) =>
  anthropic ? json({ type: "error", error: { type: "not_found_error", message: "not found" } }, { status: 404 }) : json({ error: { code: 404, message: "not found", status: "NOT_FOUND" } }, { status: 404 });

export function startVendorResourcesUpstream(): VendorResourcesUpstream {
  const requests: SeenRequest[] = [];
  const uploads = new Map<string, Uint8Array>();
  const batches = new Map<string, { object: any; requests: any[]; reads: number }>();
  const sessions = new Map<string, { displayName: string; mimeType: string }>();
  const files = new Map<string, any>();
  const caches = new Map<string, any>();
  const gBatches = new Map<string, { op: any; requests: any[]; reads: number; toFile?: boolean }>();
  let n = 0;
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const u = new URL(req.url);
      const path = u.pathname;
      const bytes = new Uint8Array(await req.arrayBuffer());
      const body = new TextDecoder().decode(bytes);
      requests.push({ method: req.method, path, query: u.search, headers: req.headers, body });
      const origin = u.origin;

      // Anthropic-style message batches.
      if (path === "/v1/messages/batches" && req.method === "POST") {
        const id = `msgbatch_${++n}`;
        const parsed = JSON.parse(body);
        const object = { id, type: "message_batch", processing_status: "in_progress", request_counts: { processing: parsed.requests.length, succeeded: 0, errored: 0, canceled: 0, expired: 0 }, results_url: null, created_at: new Date().toISOString(), ended_at: null, expires_at: new Date(Date.now() + 86400e3).toISOString(), archived_at: null, cancel_initiated_at: null };
        batches.set(id, { object, requests: parsed.requests, reads: 0 });
        return json(object);
      }
      const mb = /^\/v1\/messages\/batches\/([^/]+)(\/results|\/cancel)?$/.exec(path);
      if (mb) {
        const b = batches.get(mb[1]);
        if (!b) return notFound(true);
        if (mb[2] === "/results") {
          const lines = b.requests.map((r) =>
            JSON.stringify({ custom_id: r.custom_id, result: { type: "succeeded", message: { id: `msg_${r.custom_id}`, type: "message", role: "assistant", model: r.params.model, content: [{ type: "text", text: "ok" }], stop_reason: "end_turn", stop_sequence: null, usage: { input_tokens: USAGE.input, output_tokens: USAGE.output } } } }),
          );
          // One line at a time, a few milliseconds apart: a client can stop reading before the end.
          const stream = new ReadableStream<Uint8Array>({
            async pull(controller) {
              const line = lines.shift();
              if (line === undefined) return controller.close();
              await Bun.sleep(3);
              controller.enqueue(new TextEncoder().encode(line + "\n"));
            },
          });
          return new Response(stream, { headers: { "content-type": "application/binary" } });
        }
        if (mb[2] === "/cancel") {
          b.object = { ...b.object, processing_status: "canceling", cancel_initiated_at: new Date().toISOString() };
          return json(b.object);
        }
        if (req.method === "DELETE") {
          batches.delete(mb[1]);
          return json({ id: mb[1], type: "message_batch_deleted" });
        }
        if (b.object.processing_status === "in_progress") {
          b.object = { ...b.object, processing_status: "ended", ended_at: new Date().toISOString(), request_counts: { processing: 0, succeeded: b.requests.length, errored: 0, canceled: 0, expired: 0 }, results_url: `${origin}/v1/messages/batches/${mb[1]}/results` };
        }
        return json(b.object);
      }

      // Anthropic-style files (beta) and a message naming one.
      if (path === "/v1/files" && req.method === "POST") {
        const form = await new Response(bytes, { headers: { "content-type": req.headers.get("content-type") ?? "" } }).formData();
        const part = form.get("file") as File;
        const id = `file_${++n}`;
        const content = new Uint8Array(await part.arrayBuffer());
        const meta = { id, type: "file", filename: part.name, mime_type: part.type || "application/octet-stream", size_bytes: content.byteLength, created_at: new Date().toISOString(), downloadable: true };
        files.set(id, meta);
        uploads.set(id, content);
        return json(meta);
      }
      const af = /^\/v1\/files\/(file_[^/]+)(\/content)?$/.exec(path);
      if (af) {
        const meta = files.get(af[1]);
        if (!meta) return notFound(true);
        if (af[2]) return new Response(uploads.get(af[1]), { headers: { "content-type": meta.mime_type } });
        if (req.method === "DELETE") {
          files.delete(af[1]);
          return json({ id: af[1], type: "file_deleted" });
        }
        return json(meta);
      }
      if (path === "/v1/messages" && req.method === "POST") {
        const parsed = JSON.parse(body);
        return json({ id: `msg_${++n}`, type: "message", role: "assistant", model: parsed.model, content: [{ type: "text", text: "read it" }], stop_reason: "end_turn", stop_sequence: null, usage: { input_tokens: 20, output_tokens: 3 } });
      }

      // Generative-vendor resumable uploads.
      if (path === "/upload/v1beta/files" && req.method === "POST") {
        const session = u.searchParams.get("upload_id");
        if (!session) {
          if (req.headers.get("x-goog-upload-command") !== "start") return json({ error: { code: 400, message: "start first", status: "INVALID_ARGUMENT" } }, { status: 400 });
          const id = `up${++n}`;
          const meta = JSON.parse(body || "{}");
          sessions.set(id, { displayName: meta.file?.displayName ?? meta.file?.display_name ?? "", mimeType: req.headers.get("x-goog-upload-header-content-type") ?? "application/octet-stream" });
          return new Response("", { headers: { "x-goog-upload-url": `${origin}/upload/v1beta/files?upload_id=${id}&upload_protocol=resumable`, "x-goog-upload-status": "active" } });
        }
        const s = sessions.get(session);
        if (!s) return notFound(false);
        // As the vendor's upload server: the bytes come with their length, which they must match.
        if (req.headers.get("content-length") !== String(bytes.byteLength)) return json({ error: { code: 400, message: "content-length missing or wrong", status: "INVALID_ARGUMENT" } }, { status: 400 });
        const name = `files/f${++n}`;
        uploads.set(name, bytes);
        const file = { name, displayName: s.displayName, mimeType: s.mimeType, sizeBytes: String(bytes.byteLength), state: "ACTIVE", uri: `${origin}/v1beta/files/${name.slice(6)}` };
        files.set(name, file);
        sessions.delete(session);
        return json({ file }, { headers: { "x-goog-upload-status": "final" } });
      }
      const f = /^\/v1beta\/files\/([^/:]+)$/.exec(path);
      if (f) {
        const file = files.get(`files/${f[1]}`);
        if (!file) return notFound(false);
        if (req.method === "DELETE") {
          files.delete(`files/${f[1]}`);
          return json({});
        }
        return json(file);
      }
      const dl = /^\/download\/v1beta\/files\/([^/:]+):download$/.exec(path);
      if (dl) {
        const bytes = uploads.get(`files/${dl[1]}`);
        return bytes ? new Response(bytes) : notFound(false);
      }

      // Cached contents.
      if (path === "/v1beta/cachedContents" && req.method === "POST") {
        const parsed = JSON.parse(body);
        const cache = { name: `cachedContents/c${++n}`, model: parsed.model, displayName: parsed.displayName ?? "", usageMetadata: { totalTokenCount: 1000 }, createTime: new Date().toISOString(), expireTime: new Date(Date.now() + Number(String(parsed.ttl ?? "3600s").replace(/s$/, "")) * 1000).toISOString() };
        caches.set(cache.name, cache);
        return json(cache);
      }
      const cc = /^\/v1beta\/cachedContents\/([^/]+)$/.exec(path);
      if (cc) {
        const name = `cachedContents/${cc[1]}`;
        const cache = caches.get(name);
        if (!cache) return notFound(false);
        if (req.method === "DELETE") {
          caches.delete(name);
          return json({});
        }
        if (req.method === "PATCH") {
          const parsed = JSON.parse(body || "{}");
          const ttl = Number(String(parsed.ttl ?? "0").replace(/s$/, ""));
          cache.expireTime = new Date(Date.now() + ttl * 1000).toISOString();
        }
        return json(cache);
      }

      // generateContent and batches.
      const gm = /^\/v1beta\/models\/([^/:]+):(generateContent|batchGenerateContent)$/.exec(path);
      if (gm && gm[2] === "generateContent") {
        return json({ candidates: [{ content: { role: "model", parts: [{ text: "cached answer" }] }, finishReason: "STOP" }], usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 2, totalTokenCount: 12 }, modelVersion: gm[1] });
      }
      if (gm) {
        const parsed = JSON.parse(body);
        const name = `batches/b${++n}`;
        const inputFile = parsed.batch?.inputConfig?.fileName;
        const fromFile = typeof inputFile === "string" ? new TextDecoder().decode(uploads.get(inputFile)).trim().split("\n").map((l) => JSON.parse(l)) : undefined;
        const inline = fromFile ?? parsed.batch?.inputConfig?.requests?.requests ?? [];
        const op = { name, metadata: { "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch", model: `models/${gm[1]}`, displayName: parsed.batch?.displayName ?? "", state: "BATCH_STATE_PENDING", createTime: new Date().toISOString() } };
        gBatches.set(name, { op, requests: inline, reads: 0, toFile: fromFile !== undefined });
        return json(op);
      }
      const gb = /^\/v1beta\/batches\/([^/:]+)(:cancel)?$/.exec(path);
      if (gb) {
        const name = `batches/${gb[1]}`;
        const b = gBatches.get(name);
        if (!b) return notFound(false);
        if (gb[2]) {
          b.op = { ...b.op, metadata: { ...b.op.metadata, state: "BATCH_STATE_CANCELLED" } };
          return json({});
        }
        if (req.method === "DELETE") {
          gBatches.delete(name);
          return json({});
        }
        if (b.op.metadata.state === "BATCH_STATE_PENDING") {
          const model = b.op.metadata.model.replace(/^models\//, "");
          const response = { candidates: [{ content: { role: "model", parts: [{ text: "ok" }] }, finishReason: "STOP" }], usageMetadata: { promptTokenCount: USAGE.input, candidatesTokenCount: USAGE.output, totalTokenCount: USAGE.input + USAGE.output }, modelVersion: model };
          if (b.toFile) {
            // Results of a file batch: a JSONL file of {key, response}.
            const results = `files/r${++n}`;
            uploads.set(results, new TextEncoder().encode(b.requests.map((r: any) => JSON.stringify({ key: r.key, response })).join("\n") + "\n"));
            files.set(results, { name: results, mimeType: "application/jsonl", state: "ACTIVE" });
            b.op = { ...b.op, metadata: { ...b.op.metadata, state: "BATCH_STATE_SUCCEEDED", output: { responsesFile: results } }, done: true, response: { responsesFile: results } };
            return json(b.op);
          }
          const inlinedResponses = { inlinedResponses: b.requests.map((r: any) => ({ metadata: r.metadata, response })) };
          b.op = {
            ...b.op,
            metadata: { ...b.op.metadata, state: "BATCH_STATE_SUCCEEDED", endTime: new Date().toISOString(), output: { inlinedResponses } },
            done: true,
            response: { "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput", inlinedResponses },
          };
        }
        return json(b.op);
      }
      return notFound(path.startsWith("/v1/"));
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, requests, uploads, stop: () => server.stop(true) };
}
