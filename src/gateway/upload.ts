import { unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chunksWithin } from "../http/body";
import { ApiError } from "../http/errors";

/**
 * A multipart upload (image edits, transcriptions) on its way upstream. The body is
 * written to a spool file as it arrives, never held in memory whole, and counted against
 * the request body limit as it streams (a declared length was checked before). The few
 * small fields routing needs (`model`, `stream`) are read on the way. Each candidate is
 * sent the spooled bytes, so a fallback before the first byte can send them again; the
 * file is removed when the request is over.
 *
 * Threat: a file part whose bytes imitate a `model` field, to be routed and priced as a
 * model other than the one the upstream reads. Fields are only recognised right after a
 * real boundary line of this body, which a part's content cannot contain (the upstream's
 * parser splits on the same line), so the gateway reads the fields the upstream reads.
 */
export interface SpooledUpload {
  path: string;
  size: number;
  contentType: string;
  /** Each wanted field's first value, with the byte range of that value in the file. */
  fields: Map<string, { value: string; start: number; end: number }>;
  /** The body to send with `model` set to `model` (the spooled bytes when it is already so). */
  body(model: string): Blob;
  remove(): Promise<void>;
}

/** Longest field value read (model names, `true`): anything longer is not one of ours. */
const MAX_FIELD = 512;
/** Bytes kept from the previous chunk so a field split between chunks is still seen. */
const CARRY = 2048;

export async function spoolUpload(request: Request, limit: number, wanted: readonly string[]): Promise<SpooledUpload> {
  const contentType = request.headers.get("content-type") ?? "";
  const boundary = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  if (!contentType.toLowerCase().startsWith("multipart/form-data") || !boundary) throw new ApiError(400, "send the request as multipart/form-data (with a boundary)");
  if (!request.body) throw new ApiError(400, "the multipart body is empty");
  const line = `\r\n--${boundary[1] ?? boundary[2]}\r\n`;
  const names = wanted.map((w) => w.replace(/[^a-z_]/gi, "")).join("|");
  const field = new RegExp(`${escape(line)}content-disposition:[ \\t]*form-data;[ \\t]*name="(${names})"\\r\\n(?:[^\\r\\n]+\\r\\n)*\\r\\n([^\\r\\n]{0,${MAX_FIELD}})\\r\\n`, "gi");
  const path = join(tmpdir(), `gateway-upload-${crypto.randomUUID()}`);
  const writer = Bun.file(path).writer();
  const fields: SpooledUpload["fields"] = new Map();
  // The text scanned: "\r\n" first, so the first boundary (no line break before it) matches too.
  let window = "\r\n";
  let windowStart = -2;
  let size = 0;
  const remove = () => unlink(path).catch(() => {});
  try {
    for await (const value of chunksWithin(request.body, limit)) {
      size += value.byteLength;
      writer.write(value);
      if (fields.size < wanted.length) {
        window += Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("latin1");
        field.lastIndex = 0;
        for (let m = field.exec(window); m; m = field.exec(window)) {
          const name = m[1].toLowerCase();
          const start = windowStart + m.index + m[0].length - 2 - m[2].length;
          if (!fields.has(name)) fields.set(name, { value: Buffer.from(m[2], "latin1").toString("utf8"), start, end: start + m[2].length });
        }
        const cut = Math.max(0, window.length - CARRY);
        windowStart += cut;
        window = window.slice(cut);
      }
    }
    await writer.end();
  } catch (e) {
    await Promise.resolve(writer.end()).catch(() => {});
    await remove();
    if (e instanceof ApiError) throw e;
    throw new ApiError(400, "the upload could not be read");
  }
  const file = Bun.file(path);
  return {
    path,
    size,
    contentType,
    fields,
    body(model) {
      const f = fields.get("model");
      if (!f || f.value === model) return file;
      return new Blob([file.slice(0, f.start), model, file.slice(f.end)]);
    },
    remove,
  };
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\-]/g, "\\$&");
}
