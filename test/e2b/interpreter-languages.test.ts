// Database-independent: the code interpreter's kernels in a sandbox; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { Sandbox } from "@e2b/code-interpreter";
import { type E2BContext, startE2B, stopE2B } from "./helpers";

// The code interpreter's languages and charts through the official @e2b/code-interpreter
// SDK: JavaScript, TypeScript and Bash kernels of our own, R's Jupyter kernel, and chart
// data from matplotlib figures, each in a real code_interpreter sandbox.
for (const [what, present] of [
  ["Debian's python3-ipykernel and python3-matplotlib", Bun.spawnSync(["/usr/bin/python3", "-c", "import ipykernel, matplotlib"]).exitCode === 0],
  ["node at /usr/bin/node", existsSync("/usr/bin/node")],
  ["Debian's node-typescript", existsSync("/usr/share/nodejs/typescript")],
  ["Debian's r-cran-irkernel", existsSync("/usr/share/jupyter/kernels/ir/kernel.json")],
] as const) {
  if (!present) throw new Error(`the code interpreter's languages need ${what}: install it to run these tests (scripts/test-setup.ts)`);
}

let c: E2BContext;
let sbx: Sandbox;

beforeAll(async () => {
  c = await startE2B();
  sbx = await Sandbox.create(c.opts);
}, 240_000);

afterAll(() => stopE2B(c));

test("JavaScript: output, state between runs, ESM imports, top-level await, the last expression", async () => {
  expect((await sbx.runCode('console.log("Hello World!")', { language: "js" })).logs.stdout).toEqual(["Hello World!\n"]);
  await sbx.runCode("const x = 40; let { y } = { y: 2 }; function add(a, b) { return a + b }", { language: "javascript" });
  expect((await sbx.runCode("add(x, y)", { language: "js" })).text).toBe("42");
  const esm = await sbx.runCode("import { readFileSync } from 'fs'\nimport * as path from 'node:path'\nconsole.log(typeof readFileSync, path.basename('/a/b'))", { language: "js" });
  expect(esm.logs.stdout).toEqual(["function b\n"]);
  expect((await sbx.runCode("await Promise.resolve('Hello World!')", { language: "js" })).text).toBe("Hello World!");
  expect((await sbx.runCode("({ a: [1, 2] })", { language: "js" })).text).toBe("{ a: [ 1, 2 ] }");
  expect((await sbx.runCode("process.cwd()", { language: "js" })).text).toBe("/home/user");
}, 240_000);

test("JavaScript: an error has its name, message and stack; per-run envs hold for that run only", async () => {
  const failed = await sbx.runCode("function f() { throw new TypeError('boom') }\nf()", { language: "js" });
  expect(failed.error?.name).toBe("TypeError");
  expect(failed.error?.value).toBe("boom");
  expect(failed.error?.traceback).toContain("TypeError: boom");
  expect((await sbx.runCode("process.env.FOO", { language: "js", envs: { FOO: "bar" } })).text).toBe("bar");
  expect((await sbx.runCode("process.env.FOO || 'default'", { language: "js" })).text).toBe("default");
}, 240_000);

test("TypeScript: types are stripped, and it has a context of its own", async () => {
  const r = await sbx.runCode('interface P { name: string }\nconst p: P = { name: "ts" }\nconsole.log(p.name)\nconst n: number = 2; n * 21', { language: "ts" });
  expect(r.error).toBeUndefined();
  expect(r.logs.stdout).toEqual(["ts\n"]);
  expect(r.text).toBe("42");
  const ctx = await sbx.createCodeContext({ language: "typescript" });
  expect(ctx.language).toBe("typescript");
  expect((await sbx.runCode("typeof p", { context: ctx })).text).toBe("undefined");
}, 240_000);

test("Bash: state between runs, per-run envs, a failing command is an error", async () => {
  await sbx.runCode("X=3; cd /tmp", { language: "bash" });
  expect((await sbx.runCode("echo $X; pwd", { language: "bash" })).logs.stdout).toEqual(["3\n/tmp\n"]);
  expect((await sbx.runCode("echo $FOO", { language: "bash", envs: { FOO: "bar" } })).logs.stdout).toEqual(["bar\n"]);
  expect((await sbx.runCode("echo ${FOO:-default}", { language: "bash" })).logs.stdout).toEqual(["default\n"]);
  const failed = await sbx.runCode("echo out; echo err >&2; false", { language: "bash" });
  expect(failed.logs.stdout).toEqual(["out\n"]);
  expect(failed.logs.stderr).toEqual(["err\n"]);
  expect(failed.error?.value).toBe("1");
  // A run that ends bash is reported, and the context goes on with a new one.
  expect((await sbx.runCode("exit 3", { language: "bash" })).error?.name).toBe("KernelDied");
  expect((await sbx.runCode("echo again", { language: "bash" })).logs.stdout).toEqual(["again\n"]);
}, 240_000);

test("R: IRkernel results and per-run envs", async () => {
  expect((await sbx.runCode("1 + 1", { language: "r" })).results[0]?.text).toBe("[1] 2");
  expect((await sbx.runCode('Sys.getenv("FOO")', { language: "r", envs: { FOO: "bar" } })).results[0]?.text).toBe('[1] "bar"');
  expect((await sbx.runCode('Sys.getenv("FOO", unset = "default")', { language: "r" })).results[0]?.text).toBe('[1] "default"');
}, 300_000);

test("the default contexts are Python's and JavaScript's; restart drops a JavaScript context's state", async () => {
  const languages = (await sbx.listCodeContexts()).map((x) => x.language);
  expect(languages).toContain("python");
  expect(languages).toContain("javascript");
  const ctx = await sbx.createCodeContext({ language: "js" });
  await sbx.runCode("var kept = 1", { context: ctx });
  expect((await sbx.runCode("kept", { context: ctx })).text).toBe("1");
  await sbx.restartCodeContext(ctx);
  expect((await sbx.runCode("typeof kept", { context: ctx })).text).toBe("undefined");
}, 240_000);

test("an unknown language is refused with 400, naming the languages there are", async () => {
  // The SDK reports the status only; the body says which languages run.
  await expect(sbx.runCode("1", { language: "cobol" })).rejects.toThrow(/400/);
  const token = (sbx as unknown as { envdAccessToken?: string }).envdAccessToken;
  const res = await fetch(`${c.opts.sandboxUrl}/execute`, {
    method: "POST",
    headers: { "content-type": "application/json", "e2b-sandbox-id": sbx.sandboxId, "e2b-sandbox-port": "49999", "x-access-token": token ?? "" },
    body: JSON.stringify({ code: "1", language: "cobol" }),
  });
  expect(res.status).toBe(400);
  expect(await res.text()).toContain("python, javascript (js), typescript (ts), bash and r");
}, 60_000);

test("charts: a line figure's chart as E2B's e2b_charts extracts it", async () => {
  const r = await sbx.runCode(
    [
      "import matplotlib.pyplot as plt",
      "plt.figure()",
      "plt.plot([0, 1, 2], [0, 1, 4], label='squares')",
      "plt.title('Growth')",
      "plt.xlabel('Time (s)')",
      "plt.ylabel('Value [m]')",
      "plt.show()",
    ].join("\n"),
    { timeoutMs: 120_000 },
  );
  expect(r.error).toBeUndefined();
  const chart = r.results[0]?.chart as unknown as Record<string, unknown> & { elements: { label: string; points: [number, number][] }[] };
  expect(r.results[0]?.png).toBeDefined();
  expect(chart).toMatchObject({ type: "line", title: "Growth", x_label: "Time (s)", y_label: "Value [m]", x_unit: "s", y_unit: "m", x_scale: "linear", y_scale: "linear" });
  expect(chart.elements).toEqual([{ label: "squares", points: [[0, 0], [1, 1], [2, 4]] }]);
}, 180_000);

test("charts: bar, scatter, pie and box-and-whisker figures, and several axes as a superchart", async () => {
  const chart = async (code: string) => {
    const r = await sbx.runCode(`import matplotlib.pyplot as plt\nimport numpy as np\nfig, ax = plt.subplots()\n${code}\nplt.show()`, { timeoutMs: 120_000 });
    expect(r.error).toBeUndefined();
    return r.results[0]?.chart as unknown as { type: string; title: string | null; elements: Record<string, unknown>[] };
  };
  const bar = await chart("ax.bar(['a', 'b', 'c'], [3, 1, 2], label='sales')\nax.set_title('Bars')");
  expect(bar.type).toBe("bar");
  expect(bar.elements).toEqual([
    { label: "a", group: "sales", value: 3 },
    { label: "b", group: "sales", value: 1 },
    { label: "c", group: "sales", value: 2 },
  ]);
  const scatter = await chart("ax.scatter([1, 2], [3, 4], label='pts')");
  expect(scatter.type).toBe("scatter");
  expect(scatter.elements).toEqual([{ label: "pts", points: [[1, 3], [2, 4]] }]);
  const pie = await chart("ax.pie([1, 3], labels=['one', 'three'])");
  expect(pie.type).toBe("pie");
  expect(pie.elements).toEqual([
    { label: "one", angle: 90, radius: 1 },
    { label: "three", angle: 270, radius: 1 },
  ]);
  const box = await chart("ax.boxplot([[85, 90, 78, 92, 88], [95, 89, 76, 91, 84, 87]], labels=['A', 'B'], patch_artist=True)");
  expect(box.type).toBe("box_and_whisker");
  expect(box.elements).toEqual([
    { label: "A", min: 78, first_quartile: 85, median: 88, third_quartile: 90, max: 92, outliers: [] },
    { label: "B", min: 84, first_quartile: 84.75, median: 88, third_quartile: 90.5, max: 95, outliers: [76] },
  ]);
  const r = await sbx.runCode("import matplotlib.pyplot as plt\nfig, (a, b) = plt.subplots(1, 2)\nfig.suptitle('Both')\na.plot([1, 2], [1, 2])\nb.bar(['x', 'y'], [1, 2])\nplt.show()");
  const superchart = r.results[0]?.chart as unknown as { type: string; title: string; elements: { type: string }[] };
  expect(superchart.type).toBe("superchart");
  expect(superchart.title).toBe("Both");
  expect(superchart.elements.map((e) => e.type)).toEqual(["line", "bar"]);
}, 300_000);
