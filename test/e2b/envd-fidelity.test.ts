import { afterAll, beforeAll, expect, test } from "bun:test";
import { gzipSync } from "node:zlib";
import { CommandExitError, Sandbox, TimeoutError } from "e2b";
import { type E2BContext, startE2B, stopE2B } from "./helpers";

// envd's behaviour where the SDKs' own tests pin it down, through the official SDK.
let c: E2BContext;
let sbx: Sandbox;

beforeAll(async () => {
  c = await startE2B();
  sbx = await Sandbox.create("base", c.opts);
}, 240_000);

afterAll(() => stopE2B(c));

function envd(path: string, init: { method?: string; body?: Uint8Array | string; headers?: Record<string, string> }) {
  const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
  return c.svc.fetch(`/e2b/sandbox${path}`, { method: init.method ?? "POST", body: init.body, headers: { "e2b-sandbox-id": sbx.sandboxId, "x-access-token": token, ...init.headers } });
}

test("gzip content encoding: uploads are stored decompressed, downloads sent compressed on request", async () => {
  const info = await sbx.files.write("gz.txt", "written with gzip", { gzip: true });
  expect(info).toMatchObject({ name: "gz.txt", type: "file", path: "/home/user/gz.txt" });
  expect(await sbx.files.read("gz.txt")).toBe("written with gzip");
  expect(await sbx.files.read("gz.txt", { gzip: true })).toBe("written with gzip");
  expect(new TextDecoder().decode(await sbx.files.read("gz.txt", { format: "bytes", gzip: true }))).toBe("written with gzip");
  const many = await sbx.files.writeFiles(
    [1, 2, 3].map((i) => ({ path: `gz_${i}.txt`, data: `file ${i}` })),
    { gzip: true },
  );
  expect(many).toHaveLength(3);
  for (const i of [1, 2, 3]) expect(await sbx.files.read(`gz_${i}.txt`)).toBe(`file ${i}`);

  // On the wire: the download is gzip when asked for, plain otherwise.
  const raw = await envd("/files?path=gz.txt", { method: "GET", headers: { "accept-encoding": "gzip" } });
  expect(raw.headers.get("content-encoding")).toBe("gzip");
  expect(await raw.text()).toBe("written with gzip");
  const refused = await envd("/files?path=gz.txt", { method: "GET", headers: { "accept-encoding": "br, identity;q=0" } });
  expect(refused.status).toBe(406);
}, 60_000);

test("gzip uploads: a bomb stops at the body limit, bad codings and bad gzip are the client's error", async () => {
  // 64 MB of zeros is ~64 KB compressed: the decompressed size passes the 10 MB limit.
  const bomb = gzipSync(new Uint8Array(64 * 1024 * 1024));
  expect(bomb.byteLength).toBeLessThan(1024 * 1024);
  const octet = { "content-type": "application/octet-stream" };
  const res = await envd("/files?path=bomb.bin", { body: bomb, headers: { ...octet, "content-encoding": "gzip" } });
  expect(res.status).toBe(413);
  expect(await sbx.files.exists("bomb.bin")).toBe(false);
  const notGzip = await envd("/files?path=bad.bin", { body: new TextEncoder().encode("plain text"), headers: { ...octet, "content-encoding": "gzip" } });
  expect(notGzip.status).toBe(400);
  const br = await envd("/files?path=bad.bin", { body: new Uint8Array(4), headers: { ...octet, "content-encoding": "br" } });
  expect(br.status).toBe(400);
  expect((await br.json()).message).toContain("Content-Encoding");
  // A gzip multipart body: envd undoes the coding before reading the parts.
  const form = new FormData();
  form.append("file", new Blob(["in a form"]), "form.txt");
  const formReq = new Request("http://x/", { method: "POST", body: form });
  const type = formReq.headers.get("content-type")!;
  const body = gzipSync(new Uint8Array(await formReq.arrayBuffer()));
  const ok = await envd("/files", { body, headers: { "content-type": type, "content-encoding": "gzip" } });
  expect(ok.status, await ok.clone().text()).toBe(200);
  expect(await sbx.files.read("form.txt")).toBe("in a form");
}, 60_000);

test("ListDir in envd's order, symlinks resolved to absolute targets, removing a missing path succeeds", async () => {
  // Names chosen so that bytewise order, find's order and a depth-first walk all differ.
  await sbx.commands.run(
    "mkdir -p tree/b/z tree/b/a tree/B tree/a.d && touch tree/b/a/f tree/c tree/a tree/b/y tree/a.d/x && " +
      "ln -s c tree/link && ln -s .. tree/b/up && ln -s missing tree/broken && ln -s tree alias",
  );
  const names = (await sbx.files.list("alias", { depth: 3 })).map((e) => e.path.slice("/home/user/alias/".length));
  // The broken link is sent without a type, which the SDK leaves out of lists (as with envd).
  expect(names).toEqual(["B", "a", "a.d", "a.d/x", "b", "b/a", "b/a/f", "b/up", "b/y", "b/z", "c", "link"]);

  const entries = new Map((await sbx.files.list("tree")).map((e) => [e.name, e]));
  // A link's target fully resolved, its type and mode the target's, its permissions Go's ("L...").
  expect(entries.get("link")).toMatchObject({ type: "file", symlinkTarget: "/home/user/tree/c", mode: 0o644, permissions: "Lrwxrwxrwx" });
  // A broken link: envd falls back to the link's own path and no type.
  const broken = await sbx.files.getInfo("tree/broken");
  expect(broken.symlinkTarget).toBe("/home/user/tree/broken");
  expect(broken.type).toBeUndefined();
  expect(entries.get("c")?.symlinkTarget).toBeUndefined();
  const up = await sbx.files.getInfo("tree/b/up");
  expect(up).toMatchObject({ type: "dir", symlinkTarget: "/home/user/tree", mode: 0o755 });

  await sbx.files.remove("never-existed.txt");
  await sbx.files.remove("tree/broken");
  expect(await sbx.files.exists("tree/broken")).toBe(false);
}, 60_000);

test("metrics honour start and end", async () => {
  const start = new Date();
  const first = await sbx.getMetrics({ start, end: new Date(Date.now() + 60_000) });
  expect(first).toHaveLength(1);
  await Bun.sleep(1100);
  const both = await sbx.getMetrics({ start, end: new Date(Date.now() + 60_000) });
  expect(both).toHaveLength(2);
  // Only the second sample: a window that starts after the first one.
  const later = await sbx.getMetrics({ start: new Date(both[1].timestamp.getTime()), end: new Date(Date.now() + 60_000) });
  expect(later.every((m) => m.timestamp.getTime() >= Math.floor(both[1].timestamp.getTime() / 1000) * 1000)).toBe(true);
  expect(later.length).toBeLessThan(both.length + 1);
  // A window from before the sandbox existed is empty.
  expect(await sbx.getMetrics({ start: new Date(start.getTime() - 3_600_000), end: new Date(start.getTime() - 1_800_000) })).toHaveLength(0);
  // Without a window: everything since the sandbox started, the newest last.
  const all = await sbx.getMetrics();
  expect(all.length).toBeGreaterThanOrEqual(3);
  expect(all.at(-1)!.timestamp.getTime()).toBeGreaterThanOrEqual(both[1].timestamp.getTime());
  const res = await c.svc.fetch(`/e2b/sandboxes/${sbx.sandboxId}/metrics?start=20&end=10`, { headers: { "x-api-key": c.key } });
  expect(res.status).toBe(400);
  expect((await c.svc.fetch(`/e2b/sandboxes/${sbx.sandboxId}/metrics?start=yesterday`, { headers: { "x-api-key": c.key } })).status).toBe(400);
}, 60_000);

test("a sandbox killed during a command: the stream drops and the SDK reports the sandbox gone, not an exit code", async () => {
  const doomed = await Sandbox.create("base", c.opts);
  // Each command is killed once it runs (its first line seen), not while it is still starting.
  const running = () => {
    const up = Promise.withResolvers<void>();
    return { seen: up.promise, onStdout: () => up.resolve() };
  };
  const first = running();
  const cmd = await doomed.commands.run("echo up; exec sleep 60", { background: true, onStdout: first.onStdout });
  await first.seen;
  const watched = await doomed.commands.connect(cmd.pid);
  await doomed.kill();
  for (const handle of [cmd, watched]) {
    const err = await handle.wait().catch((e) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err.message).toContain("sandbox was killed or reached its end of life");
  }
  // A command that is itself killed still ends with its exit code.
  const second = running();
  const own = await sbx.commands.run("echo up; exec sleep 60", { background: true, onStdout: second.onStdout });
  await second.seen;
  await sbx.commands.kill(own.pid);
  const err = await own.wait().catch((e) => e);
  expect(err).toBeInstanceOf(CommandExitError);
  expect(err.exitCode).toBe(137);
}, 60_000);

// pause({ keepMemory: false }) itself, a pause to disk: test/e2b/lifecycle.test.ts.
test("pause with a memory option that is not a boolean is the client's error", async () => {
  const bad = await c.svc.fetch(`/e2b/sandboxes/${sbx.sandboxId}/pause`, { method: "POST", headers: { "x-api-key": c.key, "content-type": "application/json" }, body: JSON.stringify({ memory: "no" }) });
  expect(bad.status).toBe(400);
  expect(await sbx.isRunning()).toBe(true);
}, 60_000);

test("an e2b_ alias of our key (the shape older SDKs insist on) is the same key", async () => {
  expect(c.key).toMatch(/^sk-[0-9a-f]{64}$/);
  const alias = `e2b_${c.key.slice(3)}`;
  const opts = { ...c.opts, apiKey: alias };
  const listed = await Sandbox.list(opts).nextItems();
  expect(listed.map((s) => s.sandboxId)).toContain(sbx.sandboxId);
  const wrong = await c.svc.fetch("/e2b/sandboxes", { headers: { "x-api-key": `e2b_${"0".repeat(64)}` } });
  expect(wrong.status).toBe(401);
}, 60_000);
