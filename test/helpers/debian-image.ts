import { copyFileSync, existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * A Debian bookworm base made with debootstrap (minbase), as docker/build-base.sh makes
 * the container image's base, cached across test runs: no image registry is needed. The
 * root file system tar and an OCI image layout made from it with umoci are kept in
 * GATEWAY_TEST_CACHE (default /var/tmp/gateway-test-cache); the first run takes minutes.
 */
export const TEST_CACHE = process.env.GATEWAY_TEST_CACHE ?? "/var/tmp/gateway-test-cache";

function run(cmd: string[], step: string): void {
  const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`${step} failed (${cmd.join(" ")}):\n${r.stdout.toString().slice(-2000)}\n${r.stderr.toString().slice(-2000)}`);
}

/** The first Debian archive URL apt uses on this machine (DEBIAN_MIRROR overrides). */
function debianMirror(): string {
  if (process.env.DEBIAN_MIRROR) return process.env.DEBIAN_MIRROR;
  const files = ["/etc/apt/sources.list", ...(existsSync("/etc/apt/sources.list.d") ? readdirSync("/etc/apt/sources.list.d").map((f) => `/etc/apt/sources.list.d/${f}`) : [])];
  for (const f of files) {
    const m = /https?:\/\/\S+\/debian\/?(?=\s|$)/m.exec(existsSync(f) ? readFileSync(f, "utf8") : "");
    if (m) return m[0];
  }
  return "http://deb.debian.org/debian";
}

/** The cached debootstrap root file system as a tar (numeric owners). */
export function debianRootfsTar(): string {
  const tar = join(TEST_CACHE, "bookworm-minbase.tar");
  if (existsSync(tar)) return tar;
  if (!Bun.which("debootstrap")) throw new Error("debootstrap not found: install the Debian package 'debootstrap' (the image template tests build their base with it)");
  mkdirSync(TEST_CACHE, { recursive: true });
  const dir = mkdtempSync(join(TEST_CACHE, "deb-"));
  try {
    run(["debootstrap", "--variant=minbase", "bookworm", dir, debianMirror()], "debootstrap");
    // Like the official slim image: no package cache or lists.
    run(["sh", "-c", 'rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*', "sh", dir], "cleaning the base");
    run(["tar", "-C", dir, "--numeric-owner", "-cf", `${tar}.tmp`, "."], "packing the base");
    renameSync(`${tar}.tmp`, tar);
    return tar;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** An OCI image layout of the base (one layer, tag `base`), made with umoci; returns its skopeo source. */
export function debianOciLayout(): string {
  const tar = debianRootfsTar();
  const layout = join(TEST_CACHE, "bookworm-oci");
  const stamp = join(layout, "made-from");
  if (existsSync(stamp) && readFileSync(stamp, "utf8") === String(statSync(tar).mtimeMs)) return `oci:${layout}:base`;
  if (!Bun.which("umoci")) throw new Error("umoci not found: install the Debian package 'umoci'");
  rmSync(layout, { recursive: true, force: true });
  run(["umoci", "init", "--layout", layout], "umoci init");
  run(["umoci", "new", "--image", `${layout}:base`], "umoci new");
  run(["umoci", "raw", "add-layer", "--image", `${layout}:base`, tar], "umoci raw add-layer");
  run(["umoci", "config", "--image", `${layout}:base`, "--config.env", "GW_IMAGE=debian-bookworm", "--config.cmd", "bash"], "umoci config");
  writeFileSync(stamp, String(statSync(tar).mtimeMs));
  return `oci:${layout}:base`;
}

/** The same image as an OCI archive (skopeo copy of the layout) in `dir`. */
export function debianOciArchive(dir: string): string {
  const out = join(dir, "debian.tar");
  run(["skopeo", "copy", "--quiet", "--insecure-policy", debianOciLayout(), `oci-archive:${out}:base`], "skopeo copy");
  return `oci-archive:${out}:base`;
}

/**
 * A local apt repository with one package, `gw-hello` (installs /usr/bin/gw-hello, which
 * prints "hello from a local apt repository"), in `dir` (flat repository: `deb [trusted=yes] http://host/apt ./`).
 */
export function makeAptRepository(dir: string): void {
  const pkg = join(dir, "build", "gw-hello");
  mkdirSync(join(pkg, "DEBIAN"), { recursive: true });
  mkdirSync(join(pkg, "usr", "bin"), { recursive: true });
  writeFileSync(join(pkg, "DEBIAN", "control"), "Package: gw-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: Test <test@example.org>\nDescription: a package from the test's apt repository\n");
  writeFileSync(join(pkg, "usr", "bin", "gw-hello"), "#!/bin/sh\necho hello from a local apt repository\n", { mode: 0o755 });
  const apt = join(dir, "apt");
  mkdirSync(apt, { recursive: true });
  run(["dpkg-deb", "--root-owner-group", "--build", pkg, join(apt, "gw-hello_1.0_all.deb")], "dpkg-deb");
  run(["sh", "-c", 'cd "$1" && dpkg-scanpackages --multiversion . /dev/null > Packages 2>/dev/null', "sh", apt], "dpkg-scanpackages");
}

/**
 * The .debs apt in the debootstrap base would install for `packages` (without recommends):
 * the packages and whatever they need that the base lacks, worked out by this host's apt
 * against the base's dpkg status (same release). Taken from this host's apt cache where it
 * has them, the rest downloaded once from its Debian mirror; cached in TEST_CACHE/<name>-<hash of the list>.
 * For a local apt repository (dpkg-scanpackages) a build's apt-get installs from.
 */
export function baseDebs(name: string, packages: string[]): string {
  const dir = join(TEST_CACHE, `${name}-${new Bun.CryptoHasher("sha256").update(packages.join(" ")).digest("hex").slice(0, 12)}`);
  if (existsSync(join(dir, "done"))) return dir;
  const tmp = mkdtempSync(join(TEST_CACHE, `${name}.tmp-`));
  try {
    run(["tar", "-x", "-f", debianRootfsTar(), "-C", tmp, "./var/lib/dpkg/status"], "reading the base's dpkg status");
    const debs = join(tmp, "debs");
    mkdirSync(join(debs, "partial"), { recursive: true });
    const apt = ["apt-get", "-q", "-y", "--no-install-recommends", "-o", `Dir::State::status=${join(tmp, "var/lib/dpkg/status")}`, "-o", `Dir::Cache::archives=${debs}/`, "-o", "Debug::NoLocking=1", "install", "--download-only"];
    const uris = Bun.spawnSync([...apt, "--print-uris", ...packages], { stdout: "pipe", stderr: "pipe" });
    if (uris.exitCode !== 0) throw new Error(`apt-get --print-uris ${packages.join(" ")}:\n${uris.stderr.toString().slice(-2000)}`);
    // What the host's own installs left in its cache need not be downloaded again.
    for (const m of uris.stdout.toString().matchAll(/^'[^']+' (\S+\.deb) /gm)) {
      const cached = join("/var/cache/apt/archives", m[1]!);
      if (existsSync(cached)) run(["cp", "--", cached, join(debs, m[1]!)], "copying a cached .deb");
    }
    run([...apt, ...packages], `apt-get download of ${packages.join(" ")}`);
    rmSync(join(debs, "partial"), { recursive: true, force: true });
    rmSync(join(debs, "lock"), { force: true });
    writeFileSync(join(debs, "done"), "");
    rmSync(dir, { recursive: true, force: true });
    renameSync(debs, dir);
    return dir;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** A flat apt repository in `repo` (dpkg-scanpackages) of the .debs in `from` (hard links where the file system allows). */
export function aptRepositoryOf(from: string[], repo: string): void {
  mkdirSync(repo, { recursive: true });
  for (const dir of from) {
    for (const f of readdirSync(dir)) {
      if (!f.endsWith(".deb") || existsSync(join(repo, f))) continue;
      try {
        linkSync(join(dir, f), join(repo, f));
      } catch {
        copyFileSync(join(dir, f), join(repo, f));
      }
    }
  }
  run(["sh", "-c", 'cd "$1" && dpkg-scanpackages --multiversion . /dev/null > Packages 2>/dev/null', "sh", repo], "dpkg-scanpackages");
}
