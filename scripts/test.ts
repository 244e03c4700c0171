// The test command (`npm test`): makes the machine ready (scripts/test-setup.ts), then runs
// every test file in a `bun test` process of its own, TEST_JOBS files at a time (default 1),
// each file's output shown as it ends, then the totals and the failed files, and last checks
// that the suite left no process or network namespace behind (scripts/test-leaks.ts).
//
//   npm test                           every file, on the embedded database (PGlite)
//   TEST_DATABASE=postgres npm test    the files that reach the database, on the PostgreSQL
//                                      server (a fresh database per file); a file whose first
//                                      line says "// Database-independent:" ran in the first pass
//   npm test -- <paths or parts>       the files whose path contains one of them
//   npm test -- -t <name> ...          with an option among the arguments, they all go to a
//                                      single `bun test` as they are
//
// Why a process per file: one process for the whole suite carries what each file leaves
// behind (embedded databases, sockets, timers, heap) into the next; a file that crashes
// or hangs its process takes only itself down, and each file's output stays together.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { becomeSubreaper, snapshot, sweepLeftovers } from "./test-leaks";
import { prepare, SetupError } from "./test-setup";

const root = join(import.meta.dir, "..");
const TIMEOUT_MS = "120000";
const args = process.argv.slice(2);
const database = process.env.TEST_DATABASE ?? "pglite";
if (database !== "pglite" && database !== "postgres") {
  console.error(`TEST_DATABASE must be pglite (the default) or postgres, not '${database}'`);
  process.exit(2);
}

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" ? [] : testFiles(path);
    return /\.test\.tsx?$/.test(e.name) ? [relative(root, path)] : [];
  });
}

const databaseIndependent = (file: string) => readFileSync(join(root, file), "utf8").startsWith("// Database-independent:");
const passthrough = args.some((a) => a.startsWith("-"));
const wanted = passthrough ? [] : args.map((a) => a.replace(/^\.\//, ""));
let files = testFiles(join(root, "test")).sort();
if (wanted.length) files = files.filter((f) => wanted.some((w) => f.includes(w)));
if (database === "postgres") files = files.filter((f) => !databaseIndependent(f));
if (!files.length) {
  console.error(`no test file matches ${wanted.join(", ")}`);
  process.exit(1);
}

let prepared: Awaited<ReturnType<typeof prepare>>;
try {
  prepared = await prepare(passthrough ? testFiles(join(root, "test")) : files);
} catch (e) {
  if (!(e instanceof SetupError)) throw e;
  console.error(`setup: ${e.message}`);
  process.exit(2);
}
const env: Record<string, string | undefined> = { ...process.env, ...prepared.env };
if (database === "postgres") env.TEST_DATABASE_URL = prepared.env.TEST_POSTGRES_URL;
console.log(`${files.length} test files on ${database === "postgres" ? `PostgreSQL (${env.TEST_DATABASE_URL})` : "the embedded database"}`);

// Interrupted (Ctrl-C, CI's time limit): what the set-up started is stopped all the same.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void prepared.teardown().finally(() => process.exit(130)));
// The processes this one spawned (Bun reaps those); orphans re-parented here are reaped by the subreaper.
const spawned = new Set<number>(prepared.daemons);
const stopReaping = becomeSubreaper(() => spawned);
const before = snapshot({ namespaces: !wanted.length && !passthrough });
const exitCode = passthrough ? await runPassthrough() : await runFiles();
const leftovers = await sweepLeftovers(before, prepared.daemons);
stopReaping();
await prepared.teardown();
if (leftovers.length) {
  console.log(`\nthe suite left these behind (now removed):\n${leftovers.map((l) => `  ${l}`).join("\n")}`);
  process.exit(1);
}
process.exit(exitCode);

async function runPassthrough(): Promise<number> {
  const proc = Bun.spawn(["bun", "test", "--timeout", TIMEOUT_MS, ...args], { cwd: root, env, stdio: ["inherit", "inherit", "inherit"] });
  spawned.add(proc.pid);
  return proc.exited.finally(() => spawned.delete(proc.pid));
}

interface Outcome {
  file: string;
  ok: boolean;
  pass: number;
  fail: number;
  seconds: number;
}

async function runFiles(): Promise<number> {
  const jobs = Math.max(1, Number(process.env.TEST_JOBS ?? 1) || 1);
  let done = 0;
  const runFile = async (file: string): Promise<Outcome> => {
    const started = performance.now();
    const proc = Bun.spawn(["bun", "test", "--timeout", TIMEOUT_MS, `./${file}`], { cwd: root, stdout: "pipe", stderr: "pipe", env });
    spawned.add(proc.pid);
    void proc.exited.finally(() => spawned.delete(proc.pid));
    const [out, err, code] = await Promise.all([outputOf(proc.stdout, proc.exited), outputOf(proc.stderr, proc.exited), proc.exited]);
    const text = out + err;
    const count = (what: string) => Number(text.match(new RegExp(`^\\s*(\\d+) ${what}$`, "m"))?.[1] ?? 0);
    const outcome = { file, ok: code === 0, pass: count("pass"), fail: count("fail"), seconds: (performance.now() - started) / 1000 };
    // A failed file shows everything it printed; a passing one, its line of counts.
    if (!outcome.ok) console.log(`\n${text.trimEnd()}\n`);
    console.log(`${outcome.ok ? "ok  " : "FAIL"} ${file}: ${outcome.pass} pass, ${outcome.fail} fail${outcome.ok ? "" : `, exit code ${code}`} (${outcome.seconds.toFixed(1)} s) [${++done}/${files.length}]`);
    return outcome;
  };

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
  if (failed.length) console.log(`failed: ${failed.map((o) => o.file).join(" ")}`);
  return failed.length ? 1 : 0;
}

/**
 * A stream's text until it ends, or until shortly after its process exited: a process the
 * test left running may hold the pipe open for ever (the leak check reports it).
 */
async function outputOf(stream: ReadableStream<Uint8Array>, exited: Promise<number>): Promise<string> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let deadline: Promise<"late"> | undefined;
  void exited.then(() => (deadline = Bun.sleep(2_000).then(() => "late" as const)));
  const late = new Promise<"late">((resolve) => void exited.then(() => deadline!.then(resolve)));
  for (;;) {
    const r = await Promise.race([reader.read(), late]);
    if (r === "late") {
      void reader.cancel().catch(() => {});
      return text;
    }
    if (r.done) return text + decoder.decode();
    text += decoder.decode(r.value, { stream: true });
  }
}
