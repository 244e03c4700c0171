import { createHash, randomBytes } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { lchown, mknodWhiteout, setOpaque } from "./syscalls";

/**
 * The content-addressed layer store: DATA_DIR/templates/layers/<hex>/, each directory one
 * read-only file system layer of an image template, used as a lower directory of a
 * sandbox's overlay root (bottom first). A layer's name is the SHA-256 (lowercase hex, no
 * "sha256:" prefix) of its uncompressed tar: an imported OCI layer keeps its diff ID, a
 * committed upper directory gets the digest of a deterministic tar of its contents. Equal
 * content is stored once, whichever template or build made it.
 *
 * Whiteouts are stored as overlayfs expects them, not as OCI markers: a deleted path is a
 * character device 0/0, an opaque directory has the `trusted.overlay.opaque` extended
 * attribute set to "y" (the root service mounts each sandbox's overlay on the host).
 *
 * Ownership in a layer is the image's own (root is uid 0): a sandbox sees it through an
 * id-mapped mount onto its own unprivileged host id range (providers/local/rootfs.ts).
 *
 * A layer is written into a temporary directory and renamed into place whole, so a
 * crash never leaves a half layer under its digest; a digest directory, once there, is
 * never written again.
 */

/** What a sandbox takes from an image's configuration (OCI image config `config`). */
export interface ImageConfig {
  /** Environment of the image (`Env`, split at the first "="). */
  env: Record<string, string>;
  /** Working directory (`WorkingDir`), absolute; undefined: the user's home. */
  workdir?: string;
  /** User (`User`): a name or uid[:gid], as the image names it; undefined: the sandbox's default user. */
  user?: string;
  /** `Cmd`, undefined when the image sets none. */
  cmd?: string[];
  /** `Entrypoint`, undefined when the image sets none. */
  entrypoint?: string[];
}

export interface ImportedImage {
  /** Layer digests, bottom to top. */
  layers: string[];
  config: ImageConfig;
}

/**
 * Where an image comes from, in skopeo's transport syntax:
 *   oci-archive:/path/image.tar[:tag]   an OCI image archive
 *   oci:/path/dir[:tag]                 an OCI image layout directory
 *   docker-archive:/path/image.tar      a `docker save` archive
 *   docker-daemon:name:tag              the local Docker engine
 *   docker://registry/name:tag          a registry (with credentials if it needs them)
 */
export type ImageSource = string;

export interface ImportOptions {
  /** Registry credentials (docker:// sources). */
  credentials?: { username: string; password: string };
  /** One line per step (copying the image, unpacking each layer), for a build log or the service log. */
  progress?: (line: string) => void;
  /** Aborts the import (the copy and unpack processes are killed). */
  signal?: AbortSignal;
}

export interface CommitOptions {
  /**
   * Host id the sandbox's id 0 maps to: an upper directory written in a sandbox holds its
   * files under shifted host ids; the layer stores them unshifted (uid - base).
   */
  idBase?: number;
}

export const SOURCE_TRANSPORTS = ["oci-archive:", "oci:", "docker-archive:", "docker-daemon:", "docker://"] as const;

const HEX64 = /^[0-9a-f]{64}$/;

export class LayerStore {
  readonly dir: string;
  private readonly tmp: string;

  /** dataDir: the service's DATA_DIR. */
  constructor(dataDir: string) {
    this.dir = join(dataDir, "templates", "layers");
    this.tmp = join(dataDir, "templates", "tmp");
  }

  /** The directory of a stored layer (whether or not it exists). */
  path(digest: string): string {
    if (!HEX64.test(digest)) throw new Error(`not a layer digest: ${digest}`);
    return join(this.dir, digest);
  }

  has(digest: string): boolean {
    return HEX64.test(digest) && existsSync(join(this.dir, digest));
  }

  /** Every stored layer's digest. */
  list(): string[] {
    if (!existsSync(this.dir)) return [];
    return readdirSync(this.dir).filter((n) => HEX64.test(n));
  }

  /** Layers of `layers` that are not stored (a template naming them cannot start). */
  missing(layers: string[]): string[] {
    return layers.filter((d) => !this.has(d));
  }

  private scratch(): string {
    mkdirSync(this.dir, { recursive: true, mode: 0o711 });
    mkdirSync(this.tmp, { recursive: true, mode: 0o700 });
    return mkdtempSync(join(this.tmp, "work-"));
  }

  /**
   * Copies an image with skopeo into an OCI layout (verifying every blob's digest on the
   * way), then unpacks each layer not yet stored into its own directory.
   */
  async importImage(source: ImageSource, opts: ImportOptions = {}): Promise<ImportedImage> {
    if (!SOURCE_TRANSPORTS.some((t) => source.startsWith(t))) throw new Error(`image source must start with one of ${SOURCE_TRANSPORTS.join(", ")}: ${source}`);
    const work = this.scratch();
    const say = opts.progress ?? (() => {});
    try {
      const layout = join(work, "oci");
      say(`copying image ${redact(source)}`);
      const args = ["copy", "--quiet", "--insecure-policy", ...(opts.credentials ? ["--src-creds", `${opts.credentials.username}:${opts.credentials.password}`] : []), source, `oci:${layout}:image`];
      await run("skopeo", args, opts.signal);
      const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8"));
      const manifest = JSON.parse(readFileSync(blobPath(layout, index.manifests[0].digest), "utf8"));
      const imageConfig = JSON.parse(readFileSync(blobPath(layout, manifest.config.digest), "utf8"));
      const diffIds: string[] = imageConfig.rootfs?.diff_ids ?? [];
      if (diffIds.length !== manifest.layers.length) throw new Error("image config's diff_ids do not match its manifest's layers");
      const layers: string[] = [];
      for (const [i, layer] of (manifest.layers as { digest: string; mediaType: string }[]).entries()) {
        const digest = String(diffIds[i]).replace(/^sha256:/, "");
        if (!HEX64.test(digest)) throw new Error(`layer ${i} has no sha256 diff ID`);
        layers.push(digest);
        if (this.has(digest)) {
          say(`layer ${i + 1}/${manifest.layers.length} ${digest.slice(0, 12)} already stored`);
          continue;
        }
        say(`unpacking layer ${i + 1}/${manifest.layers.length} ${digest.slice(0, 12)}`);
        // skopeo checked each blob against the manifest's digest; the uncompressed tar must
        // match the diff ID it is stored under. Threat: an image naming another image's
        // layer digest with different content, which every template sharing that digest
        // (another organization's too) would then run.
        const tarFile = join(work, `layer-${i}.tar`);
        const actual = await decompress(blobPath(layout, layer.digest), layer.mediaType, tarFile, opts.signal);
        if (actual !== digest) throw new Error(`layer ${i} does not match its diff ID (${actual} != ${digest})`);
        const into = join(work, `layer-${i}`);
        mkdirSync(into, { mode: 0o755 });
        await unpackLayer(tarFile, into, opts.signal);
        rmSync(tarFile, { force: true });
        this.place(into, digest);
      }
      mkdirSync(dirname(this.importRecord(source)), { recursive: true, mode: 0o700 });
      writeFileSync(this.importRecord(source), JSON.stringify({ layers }));
      return { layers, config: configOf(imageConfig.config ?? {}) };
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }

  /**
   * Turns an upper directory (a stopped sandbox's, or a build step's) into a stored layer
   * and returns its digest; the upper directory is left as it was. Overlay whiteouts and
   * opaque markers are kept as they are.
   */
  async commitLayer(upperDir: string, opts: CommitOptions = {}): Promise<string> {
    if (!statSync(upperDir).isDirectory()) throw new Error(`not a directory: ${upperDir}`);
    const work = this.scratch();
    try {
      const copy = join(work, "layer");
      // cp -a keeps owners, modes, times, device nodes (whiteouts) and extended attributes (opaque markers).
      await run("cp", ["-a", "--", upperDir, copy]);
      if (opts.idBase) unshiftOwners(copy, opts.idBase);
      const digest = await digestOfTree(copy);
      if (this.has(digest)) return digest;
      this.place(copy, digest);
      return digest;
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }

  /**
   * Removes every stored layer not in `inUse` (what the database's templates, builds and
   * step cache name, and configured image templates' imports: `imageLayers`); returns the
   * removed digests. Kept whatever `inUse` says: a layer some mount uses (a running,
   * paused or pooled sandbox's overlay, a build step's sandbox), and one stored less than
   * `graceMs` ago (an import or build still running has stored it and not yet recorded it).
   */
  async collectLayers(inUse: Iterable<string>, opts: { graceMs?: number } = {}): Promise<string[]> {
    const keep = new Set(inUse);
    for (const d of mountedLayers()) keep.add(d);
    const fresh = Date.now() - (opts.graceMs ?? 0);
    const removed: string[] = [];
    for (const digest of this.list()) {
      if (keep.has(digest)) continue;
      // A rename sets the directory's change time: when it was stored.
      if (opts.graceMs && (statSync(join(this.dir, digest), { throwIfNoEntry: false })?.ctimeMs ?? 0) > fresh) continue;
      // Renamed out first: a sandbox starting meanwhile finds it missing, never half gone.
      const gone = join(this.tmp, `gc-${digest}-${randomBytes(4).toString("hex")}`);
      mkdirSync(this.tmp, { recursive: true, mode: 0o700 });
      renameSync(join(this.dir, digest), gone);
      rmSync(gone, { recursive: true, force: true });
      removed.push(digest);
    }
    // Left over by an import or commit that a crash interrupted.
    if (existsSync(this.tmp)) for (const n of readdirSync(this.tmp)) if (n.startsWith("gc-")) rmSync(join(this.tmp, n), { recursive: true, force: true });
    return removed;
  }

  /**
   * The layers the last import of `source` stored (recorded by importImage), or none: what a
   * configured image template (CONFIG_FILE `image`) uses, which no database row names.
   */
  imageLayers(source: ImageSource): string[] {
    try {
      const layers = JSON.parse(readFileSync(this.importRecord(source), "utf8")).layers;
      return Array.isArray(layers) ? layers.filter((l): l is string => typeof l === "string" && HEX64.test(l)) : [];
    } catch {
      return [];
    }
  }

  private importRecord(source: ImageSource): string {
    return join(this.dir, "..", "imports", `${createHash("sha256").update(source).digest("hex")}.json`);
  }

  private place(dir: string, digest: string): void {
    try {
      renameSync(dir, join(this.dir, digest));
    } catch (e) {
      // Another import stored the same content meanwhile: same digest, same content.
      if (!this.has(digest)) throw e;
    }
  }
}

/**
 * Digests of stored layers that something on this host has mounted: each overlay lower of an
 * image sandbox is an id-mapped bind of a layer directory, whose mountinfo root field is
 * that directory (relative to its file system). Threat: a collection removing the files
 * under a running sandbox's root because its template was deleted meanwhile.
 */
function mountedLayers(): Set<string> {
  const out = new Set<string>();
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const m = /\/layers\/([0-9a-f]{64})$/.exec(line.split(" ")[3] ?? "");
    if (m) out.add(m[1]!);
  }
  return out;
}

function blobPath(layout: string, digest: string): string {
  const [alg, hex] = String(digest).split(":");
  if (alg !== "sha256" || !HEX64.test(hex ?? "")) throw new Error(`unsupported blob digest ${digest}`);
  return join(layout, "blobs", "sha256", hex!);
}

function configOf(c: { Env?: string[]; WorkingDir?: string; User?: string; Cmd?: string[]; Entrypoint?: string[] }): ImageConfig {
  const env: Record<string, string> = {};
  for (const kv of c.Env ?? []) {
    const eq = kv.indexOf("=");
    if (eq > 0) env[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return {
    env,
    ...(c.WorkingDir ? { workdir: c.WorkingDir } : {}),
    ...(c.User ? { user: c.User } : {}),
    ...(c.Cmd?.length ? { cmd: c.Cmd } : {}),
    ...(c.Entrypoint?.length ? { entrypoint: c.Entrypoint } : {}),
  };
}

/** Credentials in a docker:// URL never reach a log line. */
function redact(source: string): string {
  return source.replace(/\/\/[^/@]*@/, "//***@");
}

/**
 * Unpacks one layer tar with GNU tar (as root: owners, modes, device nodes and extended
 * attributes as the layer has them), then turns OCI whiteout markers into overlayfs ones.
 * Threat: a hostile image's tar with `..` or absolute paths, or a symlink followed by a
 * file through it: GNU tar refuses members outside the directory and, with
 * --delay-directory-restore and no --dereference, does not write through symlinks it
 * extracted (it replaces them).
 */
async function unpackLayer(tarFile: string, into: string, signal?: AbortSignal): Promise<void> {
  // Extended attributes: user.* only. Threat: trusted.overlay.* attributes in a layer
  // (redirects, metacopy, opaque markers of its own choosing) steering the overlay; the
  // store writes the opaque markers itself, from the OCI markers.
  await run("tar", ["-x", "-f", tarFile, "-C", into, "--numeric-owner", "--same-owner", "--same-permissions", "--xattrs", "--xattrs-include=user.*", "--no-overwrite-dir", "--delay-directory-restore"], signal);
  convertWhiteouts(into);
}

/** `.wh..wh..opq` -> opaque directory; `.wh.<name>` -> character device 0/0 named <name>. */
function convertWhiteouts(dir: string): void {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (name === ".wh..wh..opq") {
      rmSync(p, { force: true });
      setOpaque(dir);
    } else if (name.startsWith(".wh.")) {
      rmSync(p, { force: true });
      const target = join(dir, name.slice(4));
      rmSync(target, { recursive: true, force: true });
      mknodWhiteout(target);
    } else if (lstatSync(p).isDirectory()) convertWhiteouts(p);
  }
}

/** Host ids of a sandbox's range back to the image's own (ids outside the range become 0, which the layer's user cannot be told apart from). */
function unshiftOwners(dir: string, base: number): void {
  const shift = (id: number) => (id >= base && id < base + 65536 ? id - base : 0);
  const walk = (p: string) => {
    const st = lstatSync(p);
    lchown(p, shift(st.uid), shift(st.gid));
    if (st.isDirectory()) for (const n of readdirSync(p)) walk(join(p, n));
  };
  walk(dir);
}

/** SHA-256 of a deterministic tar of a tree (sorted names, numeric owners, no access or change times). */
async function digestOfTree(dir: string): Promise<string> {
  const proc = Bun.spawn(["tar", "-c", "-C", dir, "--sort=name", "--numeric-owner", "--xattrs", "--xattrs-include=*", "--format=pax", "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime", "."], { stdout: "pipe", stderr: "pipe" });
  const hash = createHash("sha256");
  for await (const chunk of proc.stdout) hash.update(chunk);
  const code = await proc.exited;
  if (code !== 0) throw new Error(`tar of ${dir} failed: ${(await new Response(proc.stderr).text()).trim()}`);
  return hash.digest("hex");
}

/** Writes a layer blob uncompressed to `out` and returns the SHA-256 of what it wrote. */
async function decompress(blob: string, mediaType: string, out: string, signal?: AbortSignal): Promise<string> {
  const tool = /gzip/.test(mediaType) ? ["gzip", "-dc", "--", blob] : /zstd/.test(mediaType) ? ["zstd", "-dcq", "--", blob] : /tar$/.test(mediaType) ? ["cat", "--", blob] : undefined;
  if (!tool) throw new Error(`unsupported layer media type ${mediaType}`);
  const proc = Bun.spawn(tool, { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const kill = () => proc.kill("SIGKILL");
  signal?.addEventListener("abort", kill, { once: true });
  const hash = createHash("sha256");
  const writer = Bun.file(out).writer();
  try {
    for await (const chunk of proc.stdout) {
      hash.update(chunk);
      writer.write(chunk);
    }
    await writer.end();
    const code = await proc.exited;
    if (code !== 0) throw new Error(`${tool[0]} failed on a layer: ${(await new Response(proc.stderr).text()).trim()}`);
    return hash.digest("hex");
  } finally {
    signal?.removeEventListener("abort", kill);
  }
}

async function run(cmd: string, args: string[], signal?: AbortSignal): Promise<void> {
  const proc = Bun.spawn([cmd, ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin" } });
  const kill = () => proc.kill("SIGKILL");
  signal?.addEventListener("abort", kill, { once: true });
  try {
    const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text(), new Response(proc.stdout).text()]);
    if (signal?.aborted) throw new Error(`${cmd} was cancelled`);
    if (code !== 0) throw new Error(`${cmd} failed (exit ${code}): ${err.trim().split("\n").slice(-5).join("\n")}`);
  } finally {
    signal?.removeEventListener("abort", kill);
  }
}
