import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { mkdirSync, renameSync } from "node:fs";
import { rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { ApiError } from "../http/errors";
import { FILES_HASH } from "./build-spec";

const LINK_TTL_SEC = 3600;
const ORG = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Files of COPY steps, uploaded by content hash (the SDK's `filesHash`) as one tar each
 * (gzip or not), kept under `<DATA_DIR>/templates/uploads/<organization>/<hash>.tar`.
 * Per organization: a hash another organization uploaded is not "present" for this one,
 * so nobody learns whether someone else has some files, nor builds from them.
 *
 * The upload link is signed (HMAC of organization, hash and expiry with a key made at
 * start-up): the SDK PUTs to it without its API key. Links die with the process; an SDK
 * asks for a fresh one on every build.
 */
export class TemplateUploads {
  private readonly key = randomBytes(32);
  readonly root: string;

  constructor(dataDir: string) {
    this.root = join(dataDir, "templates", "uploads");
  }

  path(organizationId: string, hash: string): string {
    if (!ORG.test(organizationId) || !FILES_HASH.test(hash)) throw new ApiError(400, "invalid files hash (sha256 hex)");
    return join(this.root, organizationId, `${hash}.tar`);
  }

  async present(organizationId: string, hash: string): Promise<boolean> {
    return (await stat(this.path(organizationId, hash)).catch(() => undefined))?.isFile() ?? false;
  }

  /** The path and query of a signed upload link (the caller puts its origin in front). */
  link(organizationId: string, hash: string): string {
    this.path(organizationId, hash);
    const expires = Math.floor(Date.now() / 1000) + LINK_TTL_SEC;
    return `/template-uploads/${organizationId}/${hash}?expires=${expires}&signature=${this.sign(organizationId, hash, expires)}`;
  }

  private sign(organizationId: string, hash: string, expires: number): string {
    return createHmac("sha256", this.key).update(`${organizationId}\n${hash}\n${expires}`).digest("base64url");
  }

  /** Checks a link; 403 when it is not one we signed or has expired. */
  verify(organizationId: string, hash: string, expires: string | null, signature: string | null): void {
    const exp = Number(expires);
    if (!expires || !/^[0-9]{1,12}$/.test(expires) || exp * 1000 < Date.now() || !signature) throw new ApiError(403, "upload link expired or not signed");
    const expected = Buffer.from(this.sign(organizationId, hash, exp));
    const got = Buffer.from(signature);
    if (expected.length !== got.length || !timingSafeEqual(expected, got)) throw new ApiError(403, "upload link expired or not signed");
  }

  /**
   * Stores a body under its hash, at most `limit` bytes: written to a temporary name and
   * renamed, so a half-sent upload never looks present. The hash is the client's (the SDK
   * hashes the files, not the tar), so it is not checked against the bytes: a client that
   * lies about it only breaks its own builds.
   */
  async put(organizationId: string, hash: string, body: ReadableStream<Uint8Array> | null, limit: number): Promise<void> {
    const final = this.path(organizationId, hash);
    mkdirSync(join(this.root, organizationId), { recursive: true, mode: 0o700 });
    const tmp = `${final}.${randomBytes(6).toString("hex")}.part`;
    const sink = Bun.file(tmp).writer();
    let size = 0;
    try {
      if (body) {
        for await (const chunk of body) {
          size += chunk.byteLength;
          if (size > limit) throw new ApiError(413, `upload larger than ${limit} bytes (BODY_LIMIT_BYTES)`);
          sink.write(chunk);
        }
      }
      await sink.end();
      renameSync(tmp, final);
    } catch (e) {
      await Promise.resolve(sink.end()).catch(() => {});
      await rm(tmp, { force: true });
      throw e;
    }
  }

  /** Stores a file made here (a Dockerfile build's COPY sources) under its hash. */
  async adopt(organizationId: string, hash: string, file: string): Promise<void> {
    const final = this.path(organizationId, hash);
    mkdirSync(join(this.root, organizationId), { recursive: true, mode: 0o700 });
    renameSync(file, final);
  }
}
