// Database-independent: the code interpreter's kernel in a sandbox; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Sandbox } from "@e2b/code-interpreter";
import { TimeoutError } from "e2b";
import { type E2BContext, startE2B, stopE2B } from "./helpers";

// The code interpreter through the official @e2b/code-interpreter SDK, with real
// IPython kernels inside a code_interpreter sandbox.
const probe = Bun.spawnSync(["/usr/bin/python3", "-c", "import ipykernel, jupyter_client"]);
if (probe.exitCode !== 0) throw new Error("the code interpreter needs the Debian packages 'python3-ipykernel' and 'python3-jupyter-client': install them to run these tests");

let c: E2BContext;
let sbx: Sandbox;

beforeAll(async () => {
  c = await startE2B();
  // The SDK's default template (E2B's name) maps to our code_interpreter template.
  sbx = await Sandbox.create(c.opts);
}, 240_000);

afterAll(() => stopE2B(c));

test("a new sandbox lists its default Python and JavaScript contexts, and created contexts come after them", async () => {
  const fresh = await Sandbox.create(c.opts);
  try {
    const listed = await fresh.listCodeContexts();
    expect(listed.map((x) => x.language)).toEqual(["python", "javascript"]);
    expect(listed[0]!.cwd).toBe("/home/user");
    // The default context is the one runCode uses without a context.
    await fresh.runCode("z = 5");
    expect((await fresh.runCode("z", { context: listed[0] })).text).toBe("5");
    const made = await fresh.createCodeContext();
    const after = await fresh.listCodeContexts();
    expect(after.length).toBe(3);
    expect(after[after.length - 1]!.id).toBe(made.id);
  } finally {
    await fresh.kill();
  }
}, 240_000);

test("state is kept between runs; the last expression is the text result", async () => {
  const first = await sbx.runCode("x = 1");
  expect(first.error).toBeUndefined();
  const second = await sbx.runCode("x + 1");
  expect(second.text).toBe("2");
  expect(second.executionCount).toBeGreaterThan(first.executionCount!);
}, 240_000);

test("the last expression's text is as E2B gives it: a string without its quotes, other values as their repr", async () => {
  expect((await sbx.runCode("'bar'")).text).toBe("bar");
  expect((await sbx.runCode('"it\'s"')).text).toBe("it's");
  expect((await sbx.runCode("[1, 'a']")).text).toBe("[1, 'a']");
  // No truncation of long sequences (E2B's kernel config).
  expect((await sbx.runCode("list(range(2000))")).text).toContain("1999]");
  // A MIME type E2B has no field for comes under extra on the wire, as E2B's server sends it.
  const r = await sbx.runCode("from IPython.display import display\ndisplay({'application/x-custom': 'v', 'text/plain': 'p'}, raw=True)");
  expect(r.results[0]?.text).toBe("p");
  expect((r.results[0]?.raw as Record<string, unknown> | undefined)?.extra).toEqual({ "application/x-custom": "v" });
  // The interpreter's own helpers stay out of the user's namespace.
  expect((await sbx.runCode("[k for k in globals() if 'e2b' in k]")).text).toBe("[]");
}, 60_000);

test("per-run envs hold for that run only; a variable set before comes back", async () => {
  const during = await sbx.runCode("import os; os.getenv('FOO')", { envs: { FOO: "bar" } });
  expect(during.text).toBe("bar");
  expect((await sbx.runCode("os.getenv('FOO', 'default')")).text).toBe("default");
  await sbx.runCode("os.environ['KEEP'] = 'before'");
  expect((await sbx.runCode("os.environ['KEEP']", { envs: { KEEP: "during" } })).text).toBe("during");
  expect((await sbx.runCode("os.environ['KEEP']")).text).toBe("before");
  // Only strings: anything else is refused before it reaches the kernel.
  const res = await c.svc.fetch("/e2b/sandbox/execute", {
    method: "POST",
    headers: { "content-type": "application/json", "e2b-sandbox-id": sbx.sandboxId, "e2b-sandbox-port": "49999", "x-access-token": (sbx as unknown as { envdAccessToken: string }).envdAccessToken },
    body: JSON.stringify({ code: "1", env_vars: { A: 1 } }),
  });
  expect(res.status).toBe(400);
}, 60_000);

test("a matplotlib figure comes back as a PNG result", async () => {
  const r = await sbx.runCode(["import matplotlib.pyplot as plt", "plt.plot([1, 2, 3], [1, 4, 9])", "plt.title('squares')", "plt.show()"].join("\n"), { timeoutMs: 120_000 });
  expect(r.error).toBeUndefined();
  const fig = r.results.find((x) => x.png);
  expect(fig).toBeDefined();
  expect(Buffer.from(fig!.png!, "base64").subarray(1, 4).toString()).toBe("PNG");
  expect(fig!.text).toContain("Figure");
}, 180_000);

test("a DataFrame's result has E2B's data: columns as lists, timestamps in ISO form", async () => {
  const r = await sbx.runCode(["import pandas as pd", "pd.DataFrame({'a': [1, 2, 3], 'when': pd.to_datetime(['2024-01-01', '2024-01-02', '2024-01-03']), 's': ['x', 'y', 'z']})"].join("\n"), { timeoutMs: 120_000 });
  expect(r.error).toBeUndefined();
  const main = r.results.find((x) => x.isMainResult)!;
  expect(main.data).toEqual({ a: [1, 2, 3], when: ["2024-01-01T00:00:00", "2024-01-02T00:00:00", "2024-01-03T00:00:00"], s: ["x", "y", "z"] });
  expect(main.html).toContain("<table");
  const missing = await sbx.runCode("pd.DataFrame({'n': [1.5, float('nan')]})");
  expect(missing.results[0]?.data).toEqual({ n: [1.5, null] });
  // Other results have no data.
  expect((await sbx.runCode("1 + 1")).results[0]?.data).toBeUndefined();
}, 180_000);

test("rich results: PNG, HTML and JSON", async () => {
  const png = await sbx.runCode(
    [
      "import base64, struct, zlib",
      "from IPython.display import Image, HTML, JSON, display",
      "def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))",
      "raw = b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(b'\\x00\\xff\\x00\\x00')) + chunk(b'IEND', b'')",
      "display(HTML('<b>bold</b>'))",
      "display(JSON({'a': 1}))",
      "Image(data=raw, format='png')",
    ].join("\n"),
  );
  expect(png.error).toBeUndefined();
  const main = png.results.find((r) => r.isMainResult);
  expect(Buffer.from(main!.png!, "base64").subarray(1, 4).toString()).toBe("PNG");
  expect(png.results.some((r) => r.html === "<b>bold</b>")).toBe(true);
  expect(png.results.some((r) => JSON.stringify(r.json) === JSON.stringify({ a: 1 }))).toBe(true);
}, 60_000);

test("an exception comes back with name, value and traceback", async () => {
  const r = await sbx.runCode("def f():\n    raise ValueError('boom')\nf()");
  expect(r.error).toMatchObject({ name: "ValueError", value: "boom" });
  // IPython's traceback, without colours (E2B's kernel config).
  const plain = r.error!.traceback;
  expect(plain).not.toContain("\x1b[");
  expect(plain).toContain("ValueError: boom");
  expect(plain).toContain("----> 2     raise ValueError('boom')");
}, 60_000);

test("stdout is streamed as it is printed", async () => {
  // The code waits, after its first line, for a file the test writes only once that
  // line has reached it: without streaming this run could not finish.
  const seen: string[] = [];
  const r = await sbx.runCode("import os, time\nprint('first', flush=True)\nwhile not os.path.exists('/tmp/go'): time.sleep(0.02)\nprint('second')", {
    onStdout: async (m) => {
      seen.push(m.line);
      if (m.line.includes("first")) await sbx.files.write("/tmp/go", "");
    },
  });
  expect(r.logs.stdout.join("")).toBe("first\nsecond\n");
  expect(seen.join("")).toBe("first\nsecond\n");
}, 60_000);

test("two contexts are isolated; contexts can be listed, restarted and removed", async () => {
  const a = await sbx.createCodeContext();
  const b = await sbx.createCodeContext({ cwd: "/tmp" });
  await sbx.runCode("y = 'in a'", { context: a });
  expect((await sbx.runCode("y", { context: a })).text).toBe("in a");
  const inB = await sbx.runCode("y", { context: b });
  expect(inB.error?.name).toBe("NameError");
  expect((await sbx.runCode("import os; os.getcwd()", { context: b })).text).toBe("/tmp");
  const ids = (await sbx.listCodeContexts()).map((x) => x.id);
  expect(ids).toEqual(expect.arrayContaining([a.id, b.id]));
  await sbx.restartCodeContext(a);
  expect((await sbx.runCode("y", { context: a })).error?.name).toBe("NameError");
  await sbx.removeCodeContext(b);
  expect((await sbx.listCodeContexts()).map((x) => x.id)).not.toContain(b.id);
  await expect(sbx.runCode("1", { context: b })).rejects.toThrow();
}, 240_000);

test("a sandbox killed during runCode is reported as killed, not as missing packages", async () => {
  const doomed = await Sandbox.create(c.opts);
  try {
    await doomed.runCode("1");
    let killed: Promise<unknown> | undefined;
    const run = doomed.runCode("import time\nprint('started', flush=True)\ntime.sleep(300)", {
      timeoutMs: 300_000,
      onStdout: () => {
        killed ??= doomed.kill();
      },
    });
    const err = await run.then(
      () => undefined,
      (e: unknown) => e,
    );
    await killed;
    expect(err).toBeInstanceOf(TimeoutError);
    expect(String(err)).toMatch(/sandbox was killed while the request was in progress/);
  } finally {
    await doomed.kill().catch(() => {});
  }
}, 240_000);

test("a sandbox killed while its kernel starts is reported as killed", async () => {
  const doomed = await Sandbox.create(c.opts);
  try {
    const run = doomed.runCode("1").then(
      () => undefined,
      (e: unknown) => e,
    );
    await Bun.sleep(300);
    await doomed.kill();
    const err = await run;
    expect(String(err)).not.toContain("must be installed");
    // The SDK's TimeoutError (from its own copy of the e2b package, hence by name).
    expect((err as Error).name).toBe("TimeoutError");
    expect(String(err)).toMatch(/was killed while the request was in progress/);
  } finally {
    await doomed.kill().catch(() => {});
  }
}, 240_000);

test("without the sandbox's token the interpreter refuses", async () => {
  const res = await c.svc.fetch("/e2b/sandbox/execute", { method: "POST", headers: { "content-type": "application/json", "e2b-sandbox-id": sbx.sandboxId, "e2b-sandbox-port": "49999" }, body: JSON.stringify({ code: "1" }) });
  expect(res.status).toBe(401);
  expect(await res.json()).toMatchObject({ code: 401 });
});
