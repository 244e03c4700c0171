// Sandbox networks (part of `npm run bench -- sandboxes`): what a network costs a sandbox's
// create + first command (SANDBOX_NETWORK off, none and internet, same run), and the
// throughput of a 100 MiB download from a test host inside a sandbox against the same
// download on the host, and through pasta and slirp4netns alone (a namespace with curl,
// no sandbox). The test host lives in a network namespace this benchmark makes
// (test/helpers/test-hosts.ts: 198.51.100.x), removed at the end.
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestHosts, type TestHosts } from "../test/helpers/test-hosts";
import { fmt, percentile } from "./lib";

type Service = { call: (method: string, path: string, body?: unknown) => Promise<any>; close: () => Promise<void> };
type Start = (env: Record<string, string>) => Promise<Service>;

const MIB = 1024 * 1024;
const DOWNLOAD = 100 * MIB;
const ROUNDS = 7;

async function createFirst(call: Service["call"], n: number): Promise<number[]> {
  const out: number[] = [];
  const ids: string[] = [];
  for (let i = 0; i < n + 3; i++) {
    const t0 = performance.now();
    const sb = await call("POST", "/sandboxes", { templateID: "base" });
    const r = await call("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "echo", args: ["hi"] });
    if (r.stdout !== "hi\n") throw new Error("wrong output");
    // The first three warm the pool up.
    if (i >= 3) out.push(performance.now() - t0);
    ids.push(sb.sandboxID);
    // The warm pool refills in the background; give it the time a client would between creates.
    await Bun.sleep(300);
  }
  for (const id of ids) await call("DELETE", `/sandboxes/${id}`);
  return out.sort((a, b) => a - b);
}

/** MB/s of `curl` downloading 100 MiB, `argv` prefixing it (how it enters where it runs). */
async function curlSpeed(argv: string[], url: string): Promise<number> {
  const p = Bun.spawn([...argv, "curl", "-s", "-o", "/dev/null", "-w", "%{speed_download}", url], { stdout: "pipe", stderr: "pipe" });
  const out = await new Response(p.stdout).text();
  if ((await p.exited) !== 0) throw new Error(`curl failed: ${await new Response(p.stderr).text()}`);
  return Number(out) / 1e6;
}

/** A bare namespace with a user-mode stack (no sandbox, no policy): the stack's own throughput. */
async function bareStack(kind: "pasta" | "slirp4netns", url: string): Promise<number | undefined> {
  if (!Bun.which(kind)) return undefined;
  const path = join(tmpdir(), `bench-netns-${process.pid}-${kind}`);
  Bun.spawnSync(["touch", path]);
  const made = Bun.spawnSync(["unshare", `--net=${path}`, "ip", "link", "set", "lo", "up"]);
  if (made.exitCode !== 0) throw new Error("unshare --net failed");
  let stack: ReturnType<typeof Bun.spawn> | undefined;
  try {
    if (kind === "pasta") {
      const r = Bun.spawnSync(["pasta", "--runas", "0:0", "--quiet", "--netns", path, "--config-net", "--ipv4-only", "-a", "10.0.2.100", "-n", "24", "-g", "10.0.2.2", "--no-map-gw", "-t", "none", "-u", "none", "-T", "none", "-U", "none", "-P", `${path}.pid`]);
      if (r.exitCode !== 0) throw new Error("pasta failed");
    } else {
      // slirp4netns wants a process in the namespace: a sleeper entered into it.
      const holder = Bun.spawn(["nsenter", `--net=${path}`, "sleep", "600"]);
      await Bun.sleep(100);
      stack = Bun.spawn(["slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback", String(holder.pid), "tap0"], { stdout: "ignore", stderr: "ignore" });
      await Bun.sleep(500);
      stack.unref();
      const speed = await curlSpeed(["nsenter", `--net=${path}`], url);
      holder.kill("SIGKILL");
      return speed;
    }
    return await curlSpeed(["nsenter", `--net=${path}`], url);
  } finally {
    stack?.kill("SIGKILL");
    if (kind === "pasta") {
      const pid = Number(await Bun.file(`${path}.pid`).text().catch(() => "0"));
      if (pid > 0) process.kill(pid, "SIGKILL");
      rmSync(`${path}.pid`, { force: true });
    }
    Bun.spawnSync(["umount", "-l", path]);
    rmSync(path, { force: true });
  }
}

export async function networkBench(start: Start): Promise<void> {
  let th: TestHosts | undefined;
  const open: Service[] = [];
  try {
    th = await startTestHosts({ "bench.test": 0 });
    const net = { EGRESS_ALLOW_CIDRS: `127.0.0.0/8,${th.block}`, SANDBOX_DNS_SERVERS: th.dns.server };
    const rows: [string, number[]][] = [];
    for (const mode of ["off", "none", "internet"] as const) {
      const svc = await start({ ...net, SANDBOX_NETWORK: mode });
      open.push(svc);
      rows.push([mode, await createFirst(svc.call, 20)]);
    }
    const internet = open[2];
    const url = `http://${th.hosts[0]}/bytes/${DOWNLOAD}`;
    // Rounds of every target in turn, so a change in the machine's load falls on all of them alike.
    const sb = await internet.call("POST", "/sandboxes", { templateID: "base" });
    const targets: [string, () => Promise<number | undefined>][] = [
      ["host", () => curlSpeed([], url)],
      ["sandbox", async () => {
        const r = await internet.call("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "curl", args: ["-s", "-o", "/dev/null", "-w", "%{speed_download}", url] });
        if (r.exitCode !== 0) throw new Error(`curl in the sandbox failed: ${r.stderr}`);
        return Number(r.stdout) / 1e6;
      }],
      ["pasta", () => bareStack("pasta", url)],
      ["slirp4netns", () => bareStack("slirp4netns", url)],
    ];
    const speeds = new Map<string, number[]>(targets.map(([k]) => [k, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < targets.length; i++) {
        const [name, measure] = targets[(i + round) % targets.length];
        const v = await measure();
        if (v !== undefined) speeds.get(name)!.push(v);
      }
    }
    await internet.call("DELETE", `/sandboxes/${sb.sandboxID}`);
    const med = (name: string) => (speeds.get(name)!.length ? percentile(speeds.get(name)!.sort((a, b) => a - b), 50) : undefined);
    const [host, sandbox, pasta, slirp] = ["host", "sandbox", "pasta", "slirp4netns"].map(med) as [number, number, number | undefined, number | undefined];

    const p = (xs: number[], q: number) => fmt(percentile(xs, q), 2);
    const off = percentile(rows[0][1], 50);
    console.log(`\nSandbox networks: create + first command (\`echo hi\`) through the API, ${rows[0][1].length} creates per row after 3 warm-ups, the warm pool refilled between creates.\n`);
    console.log("| SANDBOX_NETWORK | p50 ms | p99 ms | vs off (p50) |");
    console.log("|---|---:|---:|---:|");
    const what = { off: "off (bwrap's own namespace, loopback only)", none: "none (a namespace of the service's, nftables, no way out)", internet: "internet (the same plus pasta, the resolver and the name proxy)" };
    for (const [mode, xs] of rows) console.log(`| ${what[mode as keyof typeof what]} | ${p(xs, 50)} | ${p(xs, 99)} | ${fmt(percentile(xs, 50) / off, 2)}x |`);
    console.log(`\nA 100 MiB download from a test host (HTTP, 198.51.100.x through a veth pair), median of ${ROUNDS} rounds (each round every target once, in rotating order), MB/s:\n`);
    console.log("| where curl runs | MB/s | vs the host |");
    console.log("|---|---:|---:|");
    console.log(`| on the host | ${fmt(host, 0)} | 1.00x |`);
    console.log(`| in a sandbox (pasta, nftables policy; 1 CPU per sandbox, pasta in its cgroup) | ${fmt(sandbox, 0)} | ${fmt(sandbox / host, 2)}x |`);
    if (pasta !== undefined) console.log(`| a bare namespace through pasta (no sandbox, no cgroup) | ${fmt(pasta, 0)} | ${fmt(pasta / host, 2)}x |`);
    if (slirp !== undefined) console.log(`| a bare namespace through slirp4netns (no sandbox, no cgroup) | ${fmt(slirp, 0)} | ${fmt(slirp / host, 2)}x |`);
  } finally {
    for (const s of open) await s.close().catch(() => {});
    await th?.close();
  }
}
