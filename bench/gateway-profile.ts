// Where the gateway's CPU goes (issue 37): the service as a self-hoster runs it (metrics on
// and scraped every second, the access log at its default level, written to a file) under
// wrk, one mode at a time, with Bun's sampling profiler on (`bun --cpu-prof`). Prints, per
// mode, the functions with the most self time (the share of all samples, idle excluded),
// and the share of the time spent in our own code (src/, providers/) against the runtime's
// and the framework's. `npm run bench -- gateway-profile`; BENCH_MODES=json,live picks
// modes, BENCH_SECONDS (default 10) the wrk run, BENCH_PROFILE_TOP (default 25) the rows,
// BENCH_COMPARE_ROOT another checkout to profile the same way after this one, BENCH_PROFILE_KEEP
// a folder to keep the profiles in.
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { children, checkTarget, MODES, type Mode, root, scratch, type Service, startService, TITLES, wrkPost } from "./gateway-targets";
import { fmt, startChild } from "./lib";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const TOP = Number(process.env.BENCH_PROFILE_TOP ?? 25);
const modes = process.env.BENCH_MODES ? (process.env.BENCH_MODES.split(",") as Mode[]) : MODES;

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** A frame's place: the file relative to the checkout, or the runtime's own name for it. */
function where(url: string, from: string): string {
  if (!url) return "(runtime)";
  const path = url.replace(/^file:\/\//, "");
  if (path.startsWith(from)) return path.slice(from.length + 1);
  const nm = path.indexOf("node_modules/");
  return nm >= 0 ? path.slice(nm) : path;
}

interface Row {
  fn: string;
  at: string;
  us: number;
}

/**
 * Self time per function (name and place) of the samples taken in [from, to) microseconds
 * after the profile's start, idle left out; and the same time given to the nearest caller
 * with a source file (the runtime's own frames, such as a fetch or a JSON.parse, and
 * Elysia's generated handlers have none): which of our functions or modules incurred it.
 */
export function selfTimes(profile: Profile, checkout: string, window: [number, number]): { total: number; self: Row[]; bySource: Row[] } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<string, Row>();
  const bySource = new Map<string, Row>();
  const add = (rows: Map<string, Row>, node: ProfileNode, us: number) => {
    const fn = node.callFrame.functionName || "(anonymous)";
    const at = node.callFrame.url ? `${where(node.callFrame.url, checkout)}:${node.callFrame.lineNumber + 1}` : "(runtime)";
    const key = `${fn}\u0000${at}`;
    const row = rows.get(key) ?? { fn, at, us: 0 };
    row.us += us;
    rows.set(key, row);
  };
  let total = 0;
  let t = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    if (t < window[0] || t >= window[1]) continue;
    const node = byId.get(profile.samples[i]);
    if (!node || node.callFrame.functionName === "(idle)") continue;
    const us = profile.timeDeltas[i + 1] ?? 0;
    total += us;
    add(self, node, us);
    let owner: ProfileNode | undefined = node;
    while (owner && !owner.callFrame.url) owner = byId.get(parent.get(owner.id) ?? -1);
    add(bySource, owner ?? node, us);
  }
  const sorted = (rows: Map<string, Row>) => [...rows.values()].sort((a, b) => b.us - a.us);
  return { total, self: sorted(self), bySource: sorted(bySource) };
}

const ours = (at: string) => at.startsWith("src/") || at.startsWith("providers/");

async function profileOne(label: string, from: string, upstream: string, mode: Mode, dir: string) {
  const profDir = mkdtempSync(join(tmpdir(), "gw-bench-prof-"));
  let service: Service | undefined;
  try {
    service = await startService(upstream, { from, bunArgs: ["--cpu-prof", `--cpu-prof-dir=${profDir}`], selfHosted: true });
    const t = service.target(label);
    await checkTarget(t, mode);
    await wrkPost(t, mode, 2, dir); // warm-up (compiled code, pools)
    const started = performance.now();
    const r = await wrkPost(t, mode, SECONDS, dir);
    const ended = performance.now();
    await service.stop();
    const exited = performance.now();
    service = undefined;
    const file = readdirSync(profDir).find((f) => f.endsWith(".cpuprofile"));
    if (!file) throw new Error(`${label}: the service wrote no profile in ${profDir}`);
    const profile: Profile = JSON.parse(readFileSync(join(profDir, file), "utf8"));
    // BENCH_PROFILE_KEEP=<dir>: the profile is kept there (for a viewer such as Chrome's DevTools).
    const keep = process.env.BENCH_PROFILE_KEEP;
    if (keep) copyFileSync(join(profDir, file), join(keep, `${label.replace(/[^A-Za-z0-9]+/g, "-")}-${mode}.cpuprofile`));
    // The measured run only: the profile ends as the process exits, so the run is placed back from there.
    const length = profile.endTime - profile.startTime;
    const window: [number, number] = [length - (exited - started) * 1000, length - (exited - ended) * 1000];
    const { total, self, bySource } = selfTimes(profile, from, window);
    const own = self.filter((x) => ours(x.at)).reduce((n, x) => n + x.us, 0);
    const pct = (us: number) => fmt((100 * us) / total, 1);
    console.log(`### ${label}: ${TITLES[mode]}\n`);
    console.log(
      `${fmt(r.rps)} req/s, ${fmt(r.cpuUs)} us CPU/request (all threads) under wrk for ${SECONDS} s; the JavaScript thread's samples in that run: ${fmt(total / 1000)} ms (${fmt(total / (r.rps * SECONDS), 1)} us/request), ${pct(own)}% of them in src/ and providers/ themselves\n`,
    );
    console.log("| self % | function | where | | by nearest source: % | function | where |\n|---:|---|---|---|---:|---|---|");
    for (let i = 0; i < TOP; i++) {
      const a = self[i];
      const b = bySource[i];
      const cells = (x: Row | undefined) => (x ? `${pct(x.us)} | ${x.fn.replaceAll("|", "\\|")} | ${x.at}` : " | | ");
      console.log(`| ${cells(a)} | | ${cells(b)} |`);
    }
    console.log("");
  } finally {
    await service?.stop();
    rmSync(profDir, { recursive: true, force: true });
  }
}

export async function run() {
  const upstream = await startChild(children, { MODE: "upstream" });
  const { dir, remove } = scratch();
  try {
    const compare = process.env.BENCH_COMPARE_ROOT;
    for (const mode of modes) {
      await profileOne("this service", root, upstream.url, mode, dir);
      if (compare) await profileOne(`baseline (${compare})`, compare, upstream.url, mode, dir);
    }
  } finally {
    remove();
    await upstream.stop();
  }
}
