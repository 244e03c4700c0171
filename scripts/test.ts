// The test command (`npm test`): every test file in a `bun test` process of its own,
// TEST_JOBS files at a time (default 1), each file's output shown as it ends, then the
// totals and the failed files. `npm test -- <paths or parts of paths>` runs the files
// whose path contains one of them; with an option among the arguments (`-t <name>`,
// `--bail`...) they all go to a single `bun test` as they are.
//
// Why a process per file: one process for the whole suite carries what each file leaves
// behind (embedded databases, sockets, timers, heap) into the next; a file that crashes
// or hangs its process takes only itself down, and each file's output stays together.
import { readdirSync } from "node:fs";
import { join, relative } from "node:path";

const root = join(import.meta.dir, "..");
const TIMEOUT_MS = "120000";
const args = process.argv.slice(2);

if (args.some((a) => a.startsWith("-"))) {
  const proc = Bun.spawn(["bun", "test", "--timeout", TIMEOUT_MS, ...args], { cwd: root, stdio: ["inherit", "inherit", "inherit"] });
  process.exit(await proc.exited);
}

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" ? [] : testFiles(path);
    return /\.test\.tsx?$/.test(e.name) ? [relative(root, path)] : [];
  });
}

const all = testFiles(join(root, "test")).sort();
const wanted = args.map((a) => a.replace(/^\.\//, ""));
const files = wanted.length ? all.filter((f) => wanted.some((w) => f.includes(w))) : all;
if (!files.length) {
  console.error(`no test file matches ${wanted.join(", ")}`);
  process.exit(1);
}
const jobs = Math.max(1, Number(process.env.TEST_JOBS ?? 1) || 1);

interface Outcome {
  file: string;
  ok: boolean;
  pass: number;
  fail: number;
  seconds: number;
}

async function runFile(file: string): Promise<Outcome> {
  const started = performance.now();
  const proc = Bun.spawn(["bun", "test", "--timeout", TIMEOUT_MS, `./${file}`], { cwd: root, stdout: "pipe", stderr: "pipe", env: process.env });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  const text = out + err;
  const count = (what: string) => Number(text.match(new RegExp(`^\\s*(\\d+) ${what}$`, "m"))?.[1] ?? 0);
  const outcome = { file, ok: code === 0, pass: count("pass"), fail: count("fail"), seconds: (performance.now() - started) / 1000 };
  // A failed file shows everything it printed; a passing one, its line of counts.
  if (!outcome.ok) console.log(`\n${text.trimEnd()}\n`);
  console.log(`${outcome.ok ? "ok  " : "FAIL"} ${file}: ${outcome.pass} pass, ${outcome.fail} fail${outcome.ok ? "" : `, exit code ${code}`} (${outcome.seconds.toFixed(1)} s) [${++done}/${files.length}]`);
  return outcome;
}

let done = 0;
const started = performance.now();
const queue = [...files];
const outcomes: Outcome[] = [];
await Promise.all(
  Array.from({ length: Math.min(jobs, files.length) }, async () => {
    for (let file = queue.shift(); file; file = queue.shift()) outcomes.push(await runFile(file));
  }),
);

const failed = outcomes.filter((o) => !o.ok);
const sum = (k: "pass" | "fail") => outcomes.reduce((n, o) => n + o[k], 0);
console.log(`\n${sum("pass")} pass, ${sum("fail")} fail, ${files.length} files, ${((performance.now() - started) / 1000).toFixed(0)} s`);
if (failed.length) {
  console.log(`failed: ${failed.map((o) => o.file).join(" ")}`);
  process.exit(1);
}
