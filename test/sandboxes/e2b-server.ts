import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, normalize, posix } from "node:path";

/**
 * A local stand-in for E2B: the REST control plane (/v2/sandboxes, pause, timeout,
 * kill, info) and the envd data plane (Connect-protocol JSON RPCs for processes and
 * the filesystem, REST /files) that the official SDK calls. Each "sandbox" is a
 * directory on this host and commands really run (in that directory) - enough to see
 * that the plugin drives the SDK correctly end to end. It is a test double of the
 * remote service, not an isolation boundary.
 */

export interface FakeSandbox {
  id: string;
  templateID: string;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  state: "running" | "paused";
  startedAt: Date;
  endAt: Date;
  root: string;
  token: string;
  /** Running commands by pid. */
  processes: Map<number, Bun.Subprocess>;
  /** Every command line started, in order. */
  commands: string[];
}

export interface E2BServer {
  url: string;
  apiKey: string;
  sandboxes: Map<string, FakeSandbox>;
  /** Every control-plane call, e.g. "POST /v2/sandboxes". */
  calls: string[];
  /** Makes the next pause calls fail with 500 (provider failure). */
  failPause: boolean;
  stop(): void;
}

const ENVD_VERSION = "0.4.0";

export function startE2BServer(): E2BServer {
  const base = mkdtempSync(join(tmpdir(), "fake-e2b-"));
  const sandboxes = new Map<string, FakeSandbox>();
  const calls: string[] = [];
  const apiKey = `e2b_test_${Math.random().toString(36).slice(2)}`;
  let n = 0;
  const state = { failPause: false };

  const json = (body: unknown, status = 200) => Response.json(body, { status });
  const apiError = (status: number, message: string) => json({ code: status, message }, status);
  const info = (s: FakeSandbox) => ({
    sandboxID: s.id,
    templateID: s.templateID,
    clientID: "fake",
    envdVersion: ENVD_VERSION,
    envdAccessToken: s.token,
    domain: null,
  });

  const control = async (req: Request, url: URL): Promise<Response> => {
    if (req.headers.get("x-api-key") !== apiKey) return apiError(401, "Invalid API key");
    const parts = url.pathname.split("/").filter(Boolean);
    calls.push(`${req.method} /${parts.map((p, i) => (i > 0 && p.startsWith("fake_") ? ":id" : p)).join("/")}`);
    const body = req.method === "POST" ? ((await req.json().catch(() => ({}))) as Record<string, any>) : {};
    if (req.method === "POST" && url.pathname === "/v2/sandboxes") {
      const id = `fake_${++n}_${Math.random().toString(36).slice(2, 8)}`;
      const root = join(base, id);
      mkdirSync(join(root, "home", "user"), { recursive: true });
      mkdirSync(join(root, "tmp"), { recursive: true });
      const now = new Date();
      const s: FakeSandbox = {
        id,
        templateID: body.templateID,
        metadata: body.metadata ?? {},
        envVars: body.envVars ?? {},
        state: "running",
        startedAt: now,
        endAt: new Date(now.getTime() + (body.timeout ?? 300) * 1000),
        root,
        token: `tok_${id}`,
        processes: new Map(),
        commands: [],
      };
      sandboxes.set(id, s);
      return json(info(s), 201);
    }
    const s = sandboxes.get(parts[parts[0] === "v2" ? 2 : 1] ?? "");
    if (!s) return apiError(404, "sandbox not found");
    const action = parts[parts[0] === "v2" ? 3 : 2];
    if (req.method === "POST" && action === "connect") {
      s.state = "running";
      if (body.timeout) s.endAt = new Date(Date.now() + body.timeout * 1000);
      return json(info(s), 201);
    }
    if (req.method === "POST" && action === "pause") {
      if (state.failPause) return apiError(500, "pause failed");
      if (s.state === "paused") return apiError(409, "already paused");
      s.state = "paused";
      return new Response(null, { status: 204 });
    }
    if (req.method === "POST" && action === "timeout") {
      s.endAt = new Date(Date.now() + body.timeout * 1000);
      return new Response(null, { status: 204 });
    }
    if (req.method === "DELETE" && !action) {
      sandboxes.delete(s.id);
      rmSync(s.root, { recursive: true, force: true });
      return new Response(null, { status: 204 });
    }
    if (req.method === "GET" && !action) {
      return json({ ...info(s), metadata: s.metadata, startedAt: s.startedAt.toISOString(), endAt: s.endAt.toISOString(), state: s.state, cpuCount: 2, memoryMB: 512, diskSizeMB: 1024 });
    }
    return apiError(404, `no route ${req.method} ${url.pathname}`);
  };

  /** A sandbox path (absolute, or relative to /home/user) on this host. */
  const hostPath = (s: FakeSandbox, p: string) => {
    const abs = posix.isAbsolute(p) ? p : posix.join("/home/user", p);
    return join(s.root, normalize(`/${abs}`));
  };
  const sandboxPath = (s: FakeSandbox, host: string) => host.slice(s.root.length) || "/";
  const entry = (s: FakeSandbox, host: string) => {
    const st = statSync(host);
    return {
      name: posix.basename(sandboxPath(s, host)),
      type: st.isDirectory() ? 2 : 1,
      path: sandboxPath(s, host),
      size: String(st.size),
      mode: st.mode & 0o777,
      permissions: "",
      owner: "user",
      group: "user",
      modifiedTime: new Date(Math.floor(st.mtimeMs)).toISOString(),
    };
  };
  const rpcError = (status: number, code: string, message: string) => json({ code, message }, status);

  const envd = async (req: Request, url: URL, s: FakeSandbox): Promise<Response> => {
    if (req.headers.get("x-access-token") !== s.token) return rpcError(401, "unauthenticated", "bad access token");
    if (s.state !== "running") return rpcError(502, "unavailable", "sandbox is paused");
    if (url.pathname === "/health") return new Response(null, { status: 204 });
    if (url.pathname === "/files") {
      const p = hostPath(s, url.searchParams.get("path") ?? "");
      if (req.method === "GET") {
        const f = Bun.file(p);
        if (!(await f.exists())) return json({ code: 404, message: "file not found" }, 404);
        return new Response(await f.arrayBuffer(), { headers: { "content-type": "application/octet-stream" } });
      }
      const form = await req.formData();
      const file = form.get("file") as Blob;
      mkdirSync(dirname(p), { recursive: true });
      await Bun.write(p, await file.arrayBuffer());
      return json([{ name: posix.basename(sandboxPath(s, p)), type: "file", path: sandboxPath(s, p) }]);
    }
    if (url.pathname === "/process.Process/Start") return startProcess(req, s);
    if (url.pathname === "/process.Process/SendSignal") {
      const body = (await req.json()) as { process?: { pid?: number }; signal?: string };
      const proc = s.processes.get(Number(body.process?.pid));
      if (!proc) return rpcError(404, "not_found", "process not found");
      // The whole process group, as envd does.
      killGroup(proc, body.signal === "SIGNAL_SIGTERM" ? "SIGTERM" : "SIGKILL");
      return json({});
    }
    if (url.pathname.startsWith("/filesystem.Filesystem/")) {
      const body = (await req.json()) as { path: string };
      const p = hostPath(s, body.path);
      let exists = true;
      try {
        statSync(p);
      } catch {
        exists = false;
      }
      if (!exists) return rpcError(404, "not_found", `path not found: ${body.path}`);
      switch (url.pathname.split("/")[2]) {
        case "Stat":
          return json({ entry: entry(s, p) });
        case "ListDir":
          return json({ entries: readdirSync(p).map((name) => entry(s, join(p, name))) });
        case "Remove":
          rmSync(p, { recursive: true, force: true });
          return json({});
      }
    }
    return rpcError(404, "unimplemented", `no route ${url.pathname}`);
  };

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 120,
    async fetch(req) {
      const url = new URL(req.url);
      const sandboxId = req.headers.get("e2b-sandbox-id");
      if (sandboxId) {
        const s = sandboxes.get(sandboxId);
        if (!s) return rpcError(502, "unavailable", "sandbox not found");
        return envd(req, url, s);
      }
      return control(req, url);
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    apiKey,
    sandboxes,
    calls,
    get failPause() {
      return state.failPause;
    },
    set failPause(v: boolean) {
      state.failPause = v;
    },
    stop() {
      server.stop(true);
      rmSync(base, { recursive: true, force: true });
    },
  };
}

function killGroup(proc: Bun.Subprocess, signal: NodeJS.Signals): void {
  try {
    process.kill(-proc.pid, signal);
  } catch {
    proc.kill(signal);
  }
}

/** Connect protocol, server streaming, JSON codec: 5-byte envelopes (flags, length). */
function envelope(flags: number, message: unknown): Uint8Array {
  const data = new TextEncoder().encode(JSON.stringify(message));
  const out = new Uint8Array(5 + data.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, data.length);
  out.set(data, 5);
  return out;
}

async function startProcess(req: Request, s: FakeSandbox): Promise<Response> {
  const raw = new Uint8Array(await req.arrayBuffer());
  const len = new DataView(raw.buffer, raw.byteOffset).getUint32(1);
  const msg = JSON.parse(new TextDecoder().decode(raw.subarray(5, 5 + len))) as { process: { cmd: string; args?: string[]; envs?: Record<string, string>; cwd?: string } };
  const proc = Bun.spawn([msg.process.cmd, ...(msg.process.args ?? [])], {
    cwd: join(s.root, "home", "user"),
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: join(s.root, "home", "user"), ...s.envVars, ...(msg.process.envs ?? {}) },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    detached: true,
  });
  s.processes.set(proc.pid, proc);
  s.commands.push([msg.process.cmd, ...(msg.process.args ?? [])].join(" "));
  void proc.exited.then(() => s.processes.delete(proc.pid));
  req.signal.addEventListener("abort", () => killGroup(proc, "SIGKILL"));
  const b64 = (c: Uint8Array) => Buffer.from(c).toString("base64");
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      controller.enqueue(envelope(0, { event: { start: { pid: proc.pid } } }));
      const pump = async (stream: ReadableStream<Uint8Array>, key: "stdout" | "stderr") => {
        for await (const chunk of stream) controller.enqueue(envelope(0, { event: { data: { [key]: b64(chunk) } } }));
      };
      await Promise.all([pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr"), proc.exited]);
      const code = proc.exitCode ?? -1;
      controller.enqueue(envelope(0, { event: { end: { exitCode: code, exited: true, status: `exit status ${code}` } } }));
      controller.enqueue(envelope(2, {}));
      controller.close();
    },
  });
  return new Response(body, { headers: { "content-type": "application/connect+json" } });
}
