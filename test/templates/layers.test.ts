// Database-independent: the layer store on its own (files, tar, skopeo, umoci), no service.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LayerStore } from "../../src/templates/layers";
import { mknodWhiteout, mount, unmountDetached } from "../../src/templates/syscalls";

/**
 * The content-addressed layer store: an OCI image with a whiteout and an opaque directory
 * imported into overlay-ready layers (checked by mounting them), an upper directory
 * committed as a layer (owners shifted back, whiteouts kept, stored once), and garbage
 * collection of what nothing uses.
 */
let dir: string;
let store: LayerStore;

function run(cmd: string[]): void {
  const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`${cmd.join(" ")}: ${r.stderr.toString()}`);
}

/** A tar of `files` (path -> content; a content of null is a directory). */
function layerTar(name: string, files: Record<string, string | null>): string {
  const root = join(dir, `src-${name}`);
  mkdirSync(root);
  for (const [path, content] of Object.entries(files)) {
    if (content === null) mkdirSync(join(root, path), { recursive: true });
    else {
      mkdirSync(join(root, path, ".."), { recursive: true });
      writeFileSync(join(root, path), content);
    }
  }
  const tar = join(dir, `${name}.tar`);
  run(["tar", "-C", root, "--numeric-owner", "--owner=0", "--group=0", "-cf", tar, "."]);
  return tar;
}

beforeAll(() => {
  if (!Bun.which("skopeo") || !Bun.which("umoci")) throw new Error("skopeo and umoci are needed: install the Debian packages 'skopeo' and 'umoci'");
  dir = mkdtempSync(join(tmpdir(), "gw-layers-"));
  store = new LayerStore(join(dir, "data"));
  const layout = join(dir, "oci");
  run(["umoci", "init", "--layout", layout]);
  run(["umoci", "new", "--image", `${layout}:img`]);
  run(["umoci", "raw", "add-layer", "--image", `${layout}:img`, layerTar("one", { "etc/keep": "kept\n", "etc/gone": "to be deleted\n", "opt/old/a": "old a\n", "opt/old/b": "old b\n" })]);
  // OCI whiteouts: .wh.gone deletes etc/gone; .wh..wh..opq hides what opt/old had below.
  run(["umoci", "raw", "add-layer", "--image", `${layout}:img`, layerTar("two", { "etc/.wh.gone": "", "opt/old/.wh..wh..opq": "", "opt/old/c": "new c\n" })]);
  run(["umoci", "config", "--image", `${layout}:img`, "--config.env", "A=1", "--config.env", "B=x=y", "--config.workingdir", "/opt", "--config.user", "1000", "--config.entrypoint", "/bin/sh", "--config.cmd", "-c", "--config.cmd", "echo hi"]);
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("an OCI layout imports as one directory per layer, whiteouts as overlayfs reads them, the image's configuration", async () => {
  const lines: string[] = [];
  const img = await store.importImage(`oci:${join(dir, "oci")}:img`, { progress: (l) => lines.push(l) });
  expect(img.layers.length).toBe(2);
  for (const d of img.layers) expect(d).toMatch(/^[0-9a-f]{64}$/);
  expect(img.config).toEqual({ env: { A: "1", B: "x=y" }, workdir: "/opt", user: "1000", entrypoint: ["/bin/sh"], cmd: ["-c", "echo hi"] });
  expect(lines[0]).toStartWith("copying image oci:");
  expect(lines.filter((l) => l.startsWith("unpacking layer")).length).toBe(2);
  const top = store.path(img.layers[1]!);
  const wh = lstatSync(join(top, "etc/gone"));
  expect(wh.isCharacterDevice() && wh.rdev === 0).toBe(true);
  expect(existsSync(join(top, "opt/old/.wh..wh..opq"))).toBe(false);
  // Mounted as a sandbox's root is: the deleted file is gone, the opaque directory holds only its own.
  const merged = join(dir, "merged");
  const upper = join(dir, "upper");
  const work = join(dir, "work");
  for (const d of [merged, upper, work]) mkdirSync(d);
  mount("overlay", merged, "overlay", 0n, `lowerdir=${top}:${store.path(img.layers[0]!)},upperdir=${upper},workdir=${work}`);
  try {
    expect(readFileSync(join(merged, "etc/keep"), "utf8")).toBe("kept\n");
    expect(existsSync(join(merged, "etc/gone"))).toBe(false);
    expect(Bun.spawnSync(["ls", join(merged, "opt/old")]).stdout.toString()).toBe("c\n");
  } finally {
    unmountDetached(merged);
  }
  // A second import stores nothing new.
  const again = await store.importImage(`oci:${join(dir, "oci")}:img`, { progress: (l) => lines.push(l) });
  expect(again.layers).toEqual(img.layers);
  expect(lines.filter((l) => l.endsWith("already stored")).length).toBe(2);
});

test("an upper directory commits as a layer: owners shifted back, whiteouts kept, equal content stored once", async () => {
  const base = 0x150000;
  const upper = join(dir, "sandbox-upper");
  mkdirSync(join(upper, "usr/local/bin"), { recursive: true });
  writeFileSync(join(upper, "usr/local/bin/tool"), "#!/bin/sh\n", { mode: 0o755 });
  mknodWhiteout(join(upper, "usr/local/removed"));
  for (const p of ["usr", "usr/local", "usr/local/bin", "usr/local/bin/tool"]) chownSync(join(upper, p), base, base);
  chownSync(join(upper, "usr/local/removed"), base, base);
  writeFileSync(join(upper, "owned-by-user"), "x");
  chownSync(join(upper, "owned-by-user"), base + 1000, base + 1000);
  const digest = await store.commitLayer(upper, { idBase: base });
  expect(digest).toMatch(/^[0-9a-f]{64}$/);
  const layer = store.path(digest);
  expect(lstatSync(join(layer, "usr/local/bin/tool")).uid).toBe(0);
  expect(lstatSync(join(layer, "owned-by-user")).uid).toBe(1000);
  const wh = lstatSync(join(layer, "usr/local/removed"));
  expect(wh.isCharacterDevice() && wh.rdev === 0).toBe(true);
  // The upper directory is left as it was.
  expect(lstatSync(join(upper, "usr/local/bin/tool")).uid).toBe(base);
  expect(await store.commitLayer(upper, { idBase: base })).toBe(digest);
  expect(store.list().filter((d) => d === digest).length).toBe(1);
});

test("garbage collection removes the layers nothing uses, and keeps the rest", async () => {
  const all = store.list();
  expect(all.length).toBe(3);
  const keep = all.slice(0, 2);
  const removed = await store.collectLayers(keep);
  expect(removed).toEqual(all.slice(2));
  expect(store.list().sort()).toEqual([...keep].sort());
  expect(store.missing(all)).toEqual(all.slice(2));
  expect(await store.collectLayers([])).toEqual(keep);
  expect(store.list()).toEqual([]);
});

test("bad sources are refused with a clear error", async () => {
  await expect(store.importImage("http://example.org/image")).rejects.toThrow("image source must start with one of");
  await expect(store.importImage(`oci:${join(dir, "missing")}:img`)).rejects.toThrow("skopeo failed");
  expect(() => store.path("../etc")).toThrow("not a layer digest");
});
