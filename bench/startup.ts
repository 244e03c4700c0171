// `npm run bench -- startup`: how long the compiled binary takes to start (issue 37).
// First start: a new, empty DATA_DIR (the embedded database is created, migrations
// applied, the first key printed). Later start: the same directory again. Each to the key
// printed (first start only) and to /readyz answering; BENCH_STARTUP_RUNS runs (default 5)
// of each, binaries interleaved within a run (bench/binary.ts: BENCH_BASELINE_BINARY).
// Medians, with the load average, since a shared machine's load moves these figures most;
// the CPU time the process used to get ready (user + system) is what the start costs on an
// idle machine.
import { rmSync } from "node:fs";
import { type Binary, binaries, loadAverage, median, newDataDir, startBinary } from "./binary";
import { fmt } from "./lib";

const RUNS = Number(process.env.BENCH_STARTUP_RUNS ?? 5);

export async function run() {
  const targets = binaries();
  const samples = new Map<Binary, { firstKey: number[]; firstReady: number[]; laterReady: number[]; firstCpu: number[]; laterCpu: number[] }>(
    targets.map((b) => [b, { firstKey: [], firstReady: [], laterReady: [], firstCpu: [], laterCpu: [] }]),
  );
  console.log(`load average before: ${loadAverage()}\n`);
  for (let i = 0; i < RUNS; i++) {
    for (const binary of i % 2 ? [...targets].reverse() : targets) {
      const s = samples.get(binary)!;
      const dataDir = newDataDir();
      try {
        const first = await startBinary(binary, dataDir);
        const { toKeyMs } = await first.waitForKey();
        await first.stop();
        s.firstKey.push(toKeyMs);
        s.firstReady.push(first.toReadyMs);
        s.firstCpu.push(first.cpuToReady * 1000);
        const later = await startBinary(binary, dataDir);
        await later.stop();
        s.laterReady.push(later.toReadyMs);
        s.laterCpu.push(later.cpuToReady * 1000);
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
  }
  console.log(`| binary | first start, to the key printed | first start, to /readyz | later start, to /readyz | CPU to /readyz, first / later start |`);
  console.log(`|---|---:|---:|---:|---:|`);
  const sec = (xs: number[]) => `${fmt(median(xs) / 1000, 2)} s (${xs.map((x) => fmt(x / 1000, 1)).join(", ")})`;
  for (const b of targets) {
    const s = samples.get(b)!;
    console.log(`| ${b.label} | ${sec(s.firstKey)} | ${sec(s.firstReady)} | ${sec(s.laterReady)} | ${fmt(median(s.firstCpu) / 1000, 2)} s / ${fmt(median(s.laterCpu) / 1000, 2)} s |`);
  }
  console.log(`\nMedians of ${RUNS} runs (each run's figures in brackets); load average after: ${loadAverage()}.`);
}
