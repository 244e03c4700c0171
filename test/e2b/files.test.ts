import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { FileNotFoundError, FilesystemEventType, Sandbox } from "e2b";
import { type E2BContext, startE2B, stopE2B } from "./helpers";

// envd's filesystem service and file transfer through the official SDK.
let c: E2BContext;
let sbx: Sandbox;

beforeAll(async () => {
  c = await startE2B();
  sbx = await Sandbox.create("base", c.opts);
}, 240_000);

afterAll(() => stopE2B(c));

test("write, read, exists, list, makeDir, rename, remove", async () => {
  const info = await sbx.files.write("/home/user/a/b.txt", "hello");
  expect(info).toMatchObject({ name: "b.txt", path: "/home/user/a/b.txt" });
  expect(await sbx.files.read("/home/user/a/b.txt")).toBe("hello");
  expect(await sbx.files.read("a/b.txt")).toBe("hello");
  expect(await sbx.files.exists("/home/user/a/b.txt")).toBe(true);
  expect(await sbx.files.exists("/home/user/nope")).toBe(false);
  expect(await sbx.files.makeDir("/home/user/a/sub")).toBe(true);
  expect(await sbx.files.makeDir("/home/user/a/sub")).toBe(false);
  await sbx.files.write("/home/user/a/sub/deep.txt", "x");
  const top = await sbx.files.list("/home/user/a");
  expect(top.map((e) => [e.name, e.type]).sort()).toEqual([["b.txt", "file"], ["sub", "dir"]]);
  const all = await sbx.files.list("/home/user/a", { depth: 2 });
  expect(all.map((e) => e.path).sort()).toEqual(["/home/user/a/b.txt", "/home/user/a/sub", "/home/user/a/sub/deep.txt"]);
  const st = await sbx.files.getInfo("/home/user/a/b.txt");
  expect(st).toMatchObject({ name: "b.txt", type: "file", size: 5, owner: "user", permissions: "-rw-r--r--" });
  const moved = await sbx.files.rename("/home/user/a/b.txt", "/home/user/c.txt");
  expect(moved).toMatchObject({ name: "c.txt", path: "/home/user/c.txt" });
  expect(await sbx.files.exists("/home/user/a/b.txt")).toBe(false);
  await sbx.files.remove("/home/user/a");
  expect(await sbx.files.exists("/home/user/a/sub/deep.txt")).toBe(false);
  await expect(sbx.files.read("/home/user/a/b.txt")).rejects.toBeInstanceOf(FileNotFoundError);
  await expect(sbx.files.list("/home/user/missing")).rejects.toBeInstanceOf(FileNotFoundError);
}, 60_000);

test("the sandbox's own view: host files are not reachable", async () => {
  // The host's /etc/passwd is not mounted; the sandbox has its own.
  expect(await sbx.files.read("/etc/passwd")).toContain("user:x:1000");
  await expect(sbx.files.read(`/proc/1/root${process.cwd()}/package.json`)).rejects.toThrow();
  await expect(sbx.files.read(`${process.cwd()}/package.json`)).rejects.toBeInstanceOf(FileNotFoundError);
});

test("watchDir sees a change", async () => {
  await sbx.files.makeDir("/home/user/watched");
  const events: { name: string; type: FilesystemEventType }[] = [];
  const handle = await sbx.files.watchDir("/home/user/watched", (e) => {
    events.push({ name: e.name, type: e.type });
  });
  await sbx.files.write("/home/user/watched/new.txt", "data");
  await waitFor(() => events.some((e) => e.name === "new.txt" && e.type === FilesystemEventType.CREATE));
  await sbx.commands.run("echo more >> /home/user/watched/new.txt");
  await waitFor(() => events.some((e) => e.name === "new.txt" && e.type === FilesystemEventType.WRITE));
  await handle.stop();
});

test("the polling watcher calls: CreateWatcher, GetWatcherEvents, RemoveWatcher", async () => {
  const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
  const rpc = async (method: string, body: unknown) => {
    const res = await c.svc.fetch(`/e2b/sandbox/filesystem.Filesystem/${method}`, { method: "POST", headers: { "content-type": "application/json", "e2b-sandbox-id": sbx.sandboxId, "x-access-token": token }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  await sbx.files.makeDir("/home/user/polled");
  const { body } = await rpc("CreateWatcher", { path: "/home/user/polled", recursive: false });
  expect(typeof body.watcherId).toBe("string");
  await sbx.files.write("/home/user/polled/x.txt", "1");
  const seen: { name: string; type: string }[] = [];
  await waitFor(() => seen.some((e) => e.name === "x.txt" && e.type === "EVENT_TYPE_CREATE"), 10_000, async () => void seen.push(...((await rpc("GetWatcherEvents", { watcherId: body.watcherId })).body.events ?? [])));
  expect((await rpc("RemoveWatcher", { watcherId: body.watcherId })).status).toBe(200);
  const gone = await rpc("GetWatcherEvents", { watcherId: body.watcherId });
  expect({ status: gone.status, code: gone.body.code }).toEqual({ status: 404, code: "not_found" });
  expect((await rpc("CreateWatcher", { path: "/home/user/none" })).body.code).toBe("not_found");
});

test("5 MB binary upload and download are byte-exact", async () => {
  const data = randomBytes(5 * 1024 * 1024);
  await sbx.files.write("/home/user/blob.bin", new Blob([data]));
  const back = await sbx.files.read("/home/user/blob.bin", { format: "bytes" });
  expect(back.length).toBe(data.length);
  expect(Buffer.from(back).equals(data)).toBe(true);
  expect((await sbx.commands.run("sha256sum /home/user/blob.bin")).stdout.split(" ")[0]).toBe(new Bun.CryptoHasher("sha256").update(data).digest("hex"));
}, 60_000);

async function waitFor(fn: () => boolean, ms = 10_000, poll?: () => Promise<void>) {
  const end = Date.now() + ms;
  for (;;) {
    await poll?.();
    if (fn()) return;
    if (Date.now() > end) throw new Error("timed out waiting");
    await Bun.sleep(20);
  }
}
