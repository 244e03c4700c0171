// Pause, resume and snapshots (part of `npm run bench -- sandboxes`, or alone as
// `npm run bench -- sandbox-lifecycle`), through the E2B control plane of an in-process
// service: pause and resume of a sandbox with 200 MiB of memory in use by a process, kept
// in memory (freezer) and paused to disk (keepMemory: false, whose resume starts the
// sandbox again from its files); a snapshot of a sandbox with 100 MiB of written files,
// and a new sandbox from it.
import { fmt, percentile } from "./lib";

const ROUNDS = 10;
/** A process holding 200 MiB of written (not only reserved) memory. */
const HOLD_MEMORY = `python3 -c "import time; b = b'\\x01' * (200 << 20); time.sleep(10**6)" >/dev/null 2>&1 &`;

export interface LifecycleService {
  url: string;
  key: string;
  close(): Promise<void>;
}

export async function lifecycleBench(start: () => Promise<LifecycleService>): Promise<void> {
  const svc = await start();
  const ids: string[] = [];
  const e2b = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${svc.url}/e2b${path}`, { method, headers: { "x-api-key": svc.key, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  const exec = async (id: string, script: string) => {
    const res = await fetch(`${svc.url}/sandboxes/${id}/processes`, { method: "POST", headers: { authorization: `Bearer ${svc.key}`, "content-type": "application/json" }, body: JSON.stringify({ cmd: "sh", args: ["-c", script], timeout: 120 }) });
    const r = (await res.json()) as { stdout: string; exitCode: number; stderr: string };
    if (r.exitCode !== 0) throw new Error(`${script}: exit ${r.exitCode} ${r.stderr}`);
    return r.stdout;
  };
  const newSandbox = async (template = "base") => {
    const { sandboxID } = await e2b("POST", "/v2/sandboxes", { templateID: template, timeout: 3600 });
    ids.push(sandboxID);
    return sandboxID as string;
  };
  /** Starts the memory holder and waits until its 200 MiB are written. */
  const holdMemory = async (id: string) => {
    await exec(id, HOLD_MEMORY);
    await exec(id, "for i in $(seq 200); do m=$(ps -C python3 -o rss= | sort -n | tail -1); [ \"\${m:-0}\" -gt 200000 ] && exit 0; sleep 0.1; done; exit 1");
  };
  const timed = async (fn: () => Promise<unknown>) => {
    const t0 = performance.now();
    await fn();
    return performance.now() - t0;
  };
  try {
    const rows: [string, number[]][] = [];
    // Kept in memory: freeze and archive the files; thaw.
    const kept = await newSandbox();
    await holdMemory(kept);
    const pauseKept: number[] = [];
    const resumeKept: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      pauseKept.push(await timed(() => e2b("POST", `/sandboxes/${kept}/pause`, {})));
      resumeKept.push(await timed(() => e2b("POST", `/v2/sandboxes/${kept}/connect`, {})));
    }
    rows.push(["pause, memory kept (freezer), 200 MiB in use", pauseKept], ["resume (connect), memory kept", resumeKept]);

    // To disk: the processes end; resume starts the sandbox again and unpacks its files.
    const disk = await newSandbox();
    const pauseDisk: number[] = [];
    const resumeDisk: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      await holdMemory(disk);
      pauseDisk.push(await timed(() => e2b("POST", `/sandboxes/${disk}/pause`, { memory: false })));
      resumeDisk.push(await timed(() => e2b("POST", `/v2/sandboxes/${disk}/connect`, {})));
    }
    rows.push(["pause to disk (keepMemory: false), 200 MiB in use", pauseDisk], ["resume (connect) from disk: a new start with the files", resumeDisk]);

    // Snapshots of 100 MiB of files (incompressible), and a sandbox from one.
    const source = await newSandbox();
    await exec(source, "head -c 104857600 /dev/urandom > /home/user/data.bin && mkdir -p /home/user/src && for i in $(seq 100); do echo $i > /home/user/src/f$i; done");
    const snap: number[] = [];
    const fromSnap: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      let snapshotID = "";
      snap.push(await timed(async () => (snapshotID = (await e2b("POST", `/sandboxes/${source}/snapshots`, {})).snapshotID)));
      fromSnap.push(await timed(async () => ids.push((await e2b("POST", "/v2/sandboxes", { templateID: snapshotID, timeout: 600 })).sandboxID)));
      if ((await exec(ids[ids.length - 1], "stat -c %s /home/user/data.bin")).trim() !== "104857600") throw new Error("the snapshot's file is not there");
      await e2b("DELETE", `/sandboxes/${ids.pop()}`);
      await e2b("DELETE", `/templates/${snapshotID}`);
    }
    rows.push(["snapshot of a running sandbox, 100 MiB of files", snap], ["create from that snapshot (start + unpack)", fromSnap]);

    console.log(`\nPause, resume and snapshots through the E2B control plane; ${ROUNDS} rounds each.\n`);
    console.log("| operation | p50 ms | p99 ms |");
    console.log("|---|---:|---:|");
    for (const [name, xs] of rows) {
      xs.sort((a, b) => a - b);
      console.log(`| ${name} | ${fmt(percentile(xs, 50), 1)} | ${fmt(percentile(xs, 99), 1)} |`);
    }
  } finally {
    for (const id of ids) await e2b("DELETE", `/sandboxes/${id}`).catch(() => {});
    await svc.close();
  }
}
