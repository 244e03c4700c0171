// Database-independent: envd 0.6.x file behaviour in a sandbox; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { FileType, FilesystemEventType, Sandbox } from "e2b";
import { type E2BContext, startE2B, stopE2B } from "./helpers";

// envd 0.6.2-0.6.4 through the official e2b SDK: file metadata (user.e2b.* extended
// attributes), watch events with their entry, and signed URLs' edge cases.
let c: E2BContext;
let sbx: Sandbox;

beforeAll(async () => {
  c = await startE2B();
  sbx = await Sandbox.create("base", c.opts);
}, 120_000);

afterAll(() => stopE2B(c));

test("the service reports envd 0.6.4, the version the newest SDK gates features on", async () => {
  expect((await Sandbox.getInfo(sbx.sandboxId, c.opts)).envdVersion).toBe("0.6.4");
});

test("metadata given on upload is stored and reported by getInfo, list and rename; an overwrite without any clears it", async () => {
  const metadata = { author: "mish", purpose: "upload" };
  const written = await sbx.files.write("meta.txt", "content", { metadata });
  expect(written.metadata).toEqual(metadata);
  expect((await sbx.files.getInfo("meta.txt")).metadata).toEqual(metadata);
  const octet = await sbx.files.write("meta-octet.txt", "content", { metadata: { k: "v" }, useOctetStream: true });
  expect(octet.metadata).toEqual({ k: "v" });
  await sbx.files.makeDir("listed");
  await sbx.files.write("listed/a.txt", "a", { metadata: { tag: "listed" } });
  await sbx.files.write("listed/b.txt", "b");
  const entries = await sbx.files.list("listed");
  expect(entries.map((e) => [e.name, e.metadata])).toEqual([
    ["a.txt", { tag: "listed" }],
    ["b.txt", undefined],
  ]);
  expect((await sbx.files.rename("meta.txt", "renamed.txt")).metadata).toEqual(metadata);
  const over = await sbx.files.write("renamed.txt", "second");
  expect(over.metadata).toBeUndefined();
  expect((await sbx.files.getInfo("renamed.txt")).metadata).toBeUndefined();
}, 120_000);

test("user.e2b.* attributes set inside the sandbox are metadata too; other user.* attributes are not", async () => {
  await sbx.files.write("xattr.txt", "x");
  const set = await sbx.commands.run(`python3 -c "import os; os.setxattr('/home/user/xattr.txt', 'user.e2b.author', b'mish'); os.setxattr('/home/user/xattr.txt', 'user.other', b'no')"`);
  expect(set.exitCode).toBe(0);
  expect((await sbx.files.getInfo("xattr.txt")).metadata).toEqual({ author: "mish" });
}, 120_000);

test("too many or too long metadata keys are refused with 400 before anything is written", async () => {
  const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
  const headers: Record<string, string> = { "e2b-sandbox-id": sbx.sandboxId, "e2b-sandbox-port": "49983", "x-access-token": token, "content-type": "application/octet-stream" };
  for (let i = 0; i < 65; i++) headers[`x-metadata-k${i}`] = "v";
  const res = await fetch(`${c.opts.sandboxUrl}/files?path=/home/user/many.txt`, { method: "POST", headers, body: "x" });
  expect(res.status).toBe(400);
  expect(await sbx.files.exists("many.txt")).toBe(false);
}, 60_000);

test("a watch with includeEntry carries the entry of the changed file", async () => {
  await sbx.files.makeDir("watched");
  await sbx.files.write("watched/f.txt", "one");
  const { promise, resolve } = Promise.withResolvers<{ name: string; entry?: { name: string; path: string; type?: FileType } }>();
  const handle = await sbx.files.watchDir(
    "watched",
    (e) => {
      if (e.type === FilesystemEventType.WRITE && e.name === "f.txt") resolve(e as never);
    },
    { includeEntry: true, allowNetworkMounts: true },
  );
  try {
    await sbx.files.write("watched/f.txt", "two");
    const event = await promise;
    expect(event.entry?.name).toBe("f.txt");
    expect(event.entry?.path).toBe("/home/user/watched/f.txt");
    expect(event.entry?.type).toBe(FileType.FILE);
  } finally {
    await handle.stop();
  }
}, 120_000);

test("signed URLs: an expired one is refused as envd refuses it; a form field upload is the file's content", async () => {
  await sbx.files.write("hello.txt", "hello world");
  const expired = await fetch(await sbx.downloadUrl("hello.txt", { useSignatureExpiration: -10_000 }));
  expect(expired.status).toBe(401);
  expect(await expired.json()).toEqual({ code: 401, message: "signature is already expired" });
  const form = new FormData();
  form.append("file", "file content");
  const up = await fetch(await sbx.uploadUrl("up.txt", { useSignatureExpiration: 10_000 }), { method: "POST", body: form });
  expect(up.status).toBe(200);
  expect(await up.json()).toEqual([{ name: "up.txt", path: "/home/user/up.txt", type: "file" }]);
  expect(await sbx.files.read("up.txt")).toBe("file content");
}, 60_000);
