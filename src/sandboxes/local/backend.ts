import { randomBytes, randomInt } from "node:crypto";
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join, posix } from "node:path";
import type { Logger } from "../../log";
import { BackendError, type BackendState, CANCELLED_MARKER, type CreateSpec, type DirEntry, type ExecResult, type ExecSpec, type Liveness, type SandboxBackend, type SandboxTemplate } from "../backend";
import { runCaptured } from "./exec";
import { ensureTraversable, prepareSandboxDir, rootfsArgs, SANDBOX_HOME, SANDBOX_PATH, SANDBOX_UID } from "./layout";
import { childrenOf, pidNamespace, pidsInNamespace, procStat, signal } from "./procfs";

export interface LocalLimits {
  /** Processes per sandbox (RLIMIT_NPROC of the sandbox's own host uid). */
  processes: number;
  /** Address space per process, MiB (RLIMIT_AS). */
  memoryMB: number;
  /** CPU seconds per process (RLIMIT_CPU). */
  cpuSeconds: number;
  /** Largest file a process may write, MiB (RLIMIT_FSIZE). */
  fileSizeMB: number;
  /** Open files per process (RLIMIT_NOFILE). */
  openFiles: number;
  /** Bytes of stdout and of stderr kept per command; the rest is replaced by a marker. */
  outputBytes: number;
}

interface WarmSandbox {
  /** Directory name under the root (`pool_...`) until a create takes it. */
  dir: string;
  state: LocalState;
  /** Lets it outlive the service (see start). */
  release: () => void;
}

export interface LocalOptions {
  /** Started sandboxes kept ready per template (0 disables). */
  warmPool: number;
  /** PATH used to find bwrap and util-linux tools (the service's environment). */
  path?: string;
  /** Where per-sandbox home and /tmp live (DATA_DIR/sandboxes). */
  root: string;
  limits: LocalLimits;
  log: Logger;
}

/** What the database keeps for a local sandbox; enough to find it after a restart. */
interface LocalState extends BackendState {
  /** Host pid of the sandbox's pid 1 and its start time (guards against pid reuse). */
  initPid: number;
  initStart: number;
  /** Host uid the sandbox runs as; unique per sandbox when the service runs as root. */
  hostUid: number;
  pidNs: string;
  /** Hostname and boot id: pids mean nothing on another host or after a reboot. */
  host: string;
}

/** This host and boot; a sandbox state from another one is not ours. */
const HOST_ID = `${hostname()}/${safeRead("/proc/sys/kernel/random/boot_id").trim()}`;

export const OUTPUT_MARKER = (stream: string, n: number) => `\n[${stream} truncated: output exceeded ${n} bytes]\n`;

const READY_TIMEOUT_MS = 10_000;
const HOST_TOOLS: [string, string][] = [
  ["bwrap", "bubblewrap"],
  ["nsenter", "util-linux"],
  ["setpriv", "util-linux"],
  ["prlimit", "util-linux"],
];

/**
 * Sandboxes as bubblewrap namespaces on this host. Each sandbox is one long-lived
 * bwrap process tree (pid 1 + `sleep infinity`) started in its own session, so it
 * survives restarts of the service; commands and file operations join its namespaces
 * with nsenter instead of starting a new bwrap each time, which keeps a command round
 * trip to a few milliseconds.
 */
export class LocalBackend implements SandboxBackend {
  /**
   * The service must run as root: it gives each sandbox its own host uid, and it joins
   * sandbox namespaces that bwrap creates under two nested user namespaces (the inner one
   * maps the sandbox's uid 1000), which only a process privileged on the host can enter.
   */
  private readonly privileged = process.getuid?.() === 0;
  private readonly tools = new Map<string, string>();
  private readonly pool = new Map<string, WarmSandbox[]>();
  private readonly filling = new Map<string, Promise<void>>();
  private closed = false;

  constructor(private readonly opts: LocalOptions) {}

  /** The first missing host program, named with the Debian package that provides it. */
  private missingTool(): string | undefined {
    for (const [tool, pkg] of HOST_TOOLS) {
      if (this.tools.has(tool)) continue;
      const path = Bun.which(tool, { PATH: this.opts.path ?? process.env.PATH ?? "" });
      if (!path) return `the local sandbox backend needs '${tool}', which is not installed: install the Debian package '${pkg}'`;
      this.tools.set(tool, path);
    }
    return undefined;
  }

  private tool(name: string): string {
    const missing = this.missingTool();
    if (missing) throw new BackendError(503, missing);
    return this.tools.get(name)!;
  }

  templateProblem(template: SandboxTemplate): string | undefined {
    if (process.platform !== "linux") return `template ${template.id} is unavailable: the local sandbox backend runs on Linux only`;
    if (!this.privileged) return `template ${template.id} is unavailable: the local sandbox backend needs the service to run as root (it starts each sandbox under its own unprivileged uid)`;
    const tool = this.missingTool();
    if (tool) return `template ${template.id} is unavailable: ${tool}`;
    for (const program of template.requires ?? []) {
      if (!Bun.which(program, { PATH: SANDBOX_PATH })) {
        return `template ${template.id} is unavailable: '${program}' is not installed on the host (Debian package '${program}')`;
      }
    }
    return undefined;
  }

  async create(spec: CreateSpec): Promise<BackendState> {
    const problem = this.templateProblem(spec.template);
    if (problem) throw new BackendError(503, problem);
    mkdirSync(this.opts.root, { recursive: true, mode: 0o711 });
    ensureTraversable(this.opts.root);
    ensureTraversable(join(this.opts.root, ".."));
    const dir = join(this.opts.root, spec.sandboxId);
    const warm = this.takeWarm(spec.template.id);
    // Bind mounts follow inodes, not paths: renaming a warm sandbox's directory to the
    // new id keeps its home and /tmp mounted.
    if (warm) renameSync(join(this.opts.root, warm.dir), dir);
    const started = warm ?? (await this.start(spec.template, spec.sandboxId));
    // From here on the sandbox outlives the service.
    started.release();
    this.refill(spec.template);
    return started.state;
  }

  /** A started, unused sandbox of this template, if the warm pool has a live one. */
  private takeWarm(templateId: string): WarmSandbox | undefined {
    const pool = this.pool.get(templateId) ?? [];
    for (let w = pool.shift(); w; w = pool.shift()) {
      if (procStat(w.state.initPid)?.startTime === w.state.initStart) return w;
      void this.destroyDir(w.dir, w.state);
    }
    return undefined;
  }

  /**
   * Keeps `warmPool` started sandboxes per template ready, so that creating one is a
   * directory rename instead of a bwrap start. They hold no user state: envVars are
   * applied per command.
   */
  private refill(template: SandboxTemplate): void {
    if (this.opts.warmPool <= 0 || this.closed || this.filling.has(template.id)) return;
    const fill = (async () => {
      const pool = this.pool.get(template.id) ?? [];
      this.pool.set(template.id, pool);
      while (!this.closed && pool.length < this.opts.warmPool) {
        const dir = `pool_${randomBytes(8).toString("hex")}`;
        const started = await this.start(template, dir);
        if (this.closed) await this.destroyDir(dir, started.state);
        else pool.push({ dir, ...started });
      }
    })()
      .catch((e) => this.opts.log.warn("warm sandbox pool not filled", { template: template.id, err: e }))
      .finally(() => this.filling.delete(template.id));
    this.filling.set(template.id, fill);
  }

  /** Shutdown: warm sandboxes belong to this process only; client sandboxes stay running. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.filling.values());
    for (const pool of this.pool.values()) for (const w of pool.splice(0)) await this.destroyDir(w.dir, w.state);
  }

  private async destroyDir(dir: string, s: LocalState): Promise<void> {
    if (procStat(s.initPid)?.startTime === s.initStart) {
      signal(s.initPid, "SIGKILL");
      for (let i = 0; i < 200 && procStat(s.initPid)?.startTime === s.initStart && procStat(s.initPid)?.state !== "Z"; i++) await Bun.sleep(5);
    }
    rmSync(join(this.opts.root, dir), { recursive: true, force: true });
  }

  /** Starts one sandbox (bwrap and its long-lived pid 1) in DATA_DIR/sandboxes/<dirName>. */
  private async start(template: SandboxTemplate, dirName: string): Promise<{ state: LocalState; release: () => void }> {
    // A fresh host uid per sandbox: RLIMIT_NPROC counts per uid, and files of one
    // sandbox are unreadable to the uid of another even if a path leaked.
    const hostUid = randomInt(0x100000, 0x3fffffff);
    const paths = prepareSandboxDir(this.opts.root, dirName, hostUid);
    const logFd = openSync(join(paths.dir, "bwrap.log"), "w", 0o600);
    const argv = [
      ...this.limitArgs(),
      // bwrap itself runs unprivileged, as the sandbox's own host uid.
      this.tool("setpriv"), `--reuid=${hostUid}`, `--regid=${hostUid}`, "--clear-groups", "--",
      this.tool("bwrap"),
      // Threats: host processes, host network (the service and its database listen on
      // 127.0.0.1), System V IPC and hostname. New user, pid, mount, ipc, uts, net and
      // cgroup namespaces; the sandbox's loopback is its own.
      "--unshare-all",
      "--unshare-user",
      "--uid", String(SANDBOX_UID),
      "--gid", String(SANDBOX_UID),
      // Nested user namespaces are a common kernel attack surface; nothing in a sandbox needs them.
      "--disable-userns",
      "--hostname", "sandbox",
      // Threat: TIOCSTI keystroke injection into a controlling terminal.
      "--new-session",
      ...rootfsArgs(template),
      "--ro-bind", join(paths.etc, "passwd"), "/etc/passwd",
      "--ro-bind", join(paths.etc, "group"), "/etc/group",
      "--ro-bind", join(paths.etc, "hosts"), "/etc/hosts",
      "--proc", "/proc",
      "--dev", "/dev",
      "--bind", paths.home, SANDBOX_HOME,
      "--bind", paths.tmp, "/tmp",
      // Threat: writing to the system root. bwrap's root is a tmpfs; make it read-only
      // once everything is mounted, leaving only home and /tmp writable.
      "--remount-ro", "/",
      "--chdir", SANDBOX_HOME,
      "--clearenv",
      "--setenv", "HOME", SANDBOX_HOME,
      "--setenv", "PATH", SANDBOX_PATH,
      "--",
      // Waits for "go" on stdin before settling down: a warm sandbox whose service dies
      // before handing it out sees end-of-file instead and exits, so it cannot leak.
      "/bin/sh", "-c", 'echo ready; read go; [ "$go" = go ] || exit 0; exec sleep infinity </dev/null >/dev/null 2>&1',
    ];
    // detached: a new session, so a terminal's Ctrl-C or a signal to the service's process
    // group does not reach sandboxes, and they outlive the service.
    const proc = Bun.spawn(argv, { stdin: "pipe", stdout: "pipe", stderr: logFd, env: {}, detached: true });
    closeSync(logFd);
    // Until state.json exists, this is how start-up reconciliation finds a sandbox whose
    // creation a crash interrupted.
    writeFileSync(join(paths.dir, "bwrap.pid"), String(proc.pid), { mode: 0o600 });
    proc.unref();
    try {
      const ready = await readyLine(proc.stdout, READY_TIMEOUT_MS);
      if (!ready) {
        const log = safeRead(join(paths.dir, "bwrap.log")).trim();
        throw new BackendError(500, `sandbox failed to start${log ? `: ${log}` : ""}`);
      }
      // prlimit and setpriv exec, so proc.pid is bwrap itself; its one child is the
      // sandbox's pid 1.
      const initPid = childrenOf(proc.pid)[0];
      const st = initPid ? procStat(initPid) : undefined;
      const pidNs = initPid ? pidNamespace(initPid) : undefined;
      if (!st || !pidNs) throw new BackendError(500, "sandbox failed to start: its init process vanished");
      const state: LocalState = { initPid, initStart: st.startTime, hostUid, pidNs, host: HOST_ID };
      // Read back by start-up reconciliation, which must find (and kill) leftovers.
      // Written whole or not at all (a crash mid-write must not leave half a file).
      writeFileSync(join(paths.dir, "state.json.tmp"), JSON.stringify(state), { mode: 0o600 });
      renameSync(join(paths.dir, "state.json.tmp"), join(paths.dir, "state.json"));
      const release = () => {
        proc.stdin.write("go\n");
        void proc.stdin.end();
      };
      return { state, release };
    } catch (e) {
      proc.kill("SIGKILL");
      for (const c of childrenOf(proc.pid)) signal(c, "SIGKILL");
      rmSync(paths.dir, { recursive: true, force: true });
      throw e;
    }
  }

  /** prlimit arguments: limits inherited by the sandbox and by every command run in it. */
  private limitArgs(): string[] {
    const l = this.opts.limits;
    return [
      this.tool("prlimit"),
      // Threat: fork bombs. Counted per host uid, which is unique to the sandbox.
      `--nproc=${l.processes}`,
      // Threat: memory hogs taking the host's memory.
      `--as=${l.memoryMB * 1024 * 1024}`,
      // Threat: busy loops in background processes burning CPU forever.
      `--cpu=${l.cpuSeconds}`,
      // Threat: filling the host's disk through one huge file.
      `--fsize=${l.fileSizeMB * 1024 * 1024}`,
      `--nofile=${l.openFiles}`,
      "--",
    ];
  }

  private live(id: string, state: BackendState): LocalState {
    const s = state as LocalState;
    if (s.host !== HOST_ID) throw new BackendError(409, `sandbox ${id} runs on another host (${s.host.split("/")[0]}); use the service there`);
    const st = procStat(s.initPid);
    // A zombie init (killed, not yet reaped) is as gone as a missing one.
    if (!st || st.startTime !== s.initStart || st.state === "Z" || st.state === "X") throw new BackendError(409, `sandbox ${id} is no longer running on this host`);
    return s;
  }

  /** Host argv that runs `command` inside the sandbox as its user. */
  private enterArgs(s: LocalState, command: string[]): string[] {
    return [
      // No setuid escalation: every bwrap mount is nosuid, and host root is not mapped
      // in the sandbox's user namespace, so setuid-root binaries gain nothing.
      ...this.limitArgs(),
      this.tool("nsenter"), "-t", String(s.initPid),
      "--user", "--mount", "--pid", "--net", "--ipc", "--uts", "--root", "--wd",
      "--setuid", String(SANDBOX_UID), "--setgid", String(SANDBOX_UID),
      "--",
      ...command,
    ];
  }

  async exec(id: string, state: BackendState, spec: ExecSpec): Promise<ExecResult> {
    const s = this.live(id, state);
    const max = this.opts.limits.outputBytes;
    const r = await runCaptured({ argv: this.enterArgs(s, [spec.cmd, ...spec.args]), env: sandboxEnv(spec.envVars), pidNs: s.pidNs, timeoutMs: spec.timeoutMs, maxOutput: max, signal: spec.signal });
    let stdout = new TextDecoder().decode(r.stdout);
    let stderr = new TextDecoder().decode(r.stderr);
    if (r.stdoutTruncated) stdout += OUTPUT_MARKER("stdout", max);
    if (r.stderrTruncated) stderr += OUTPUT_MARKER("stderr", max);
    if (r.timedOut) stderr += `\n[command timed out after ${spec.timeoutMs / 1000} s and was killed]\n`;
    else if (r.cancelled) stderr += CANCELLED_MARKER;
    return { stdout, stderr, exitCode: r.exitCode };
  }

  /**
   * File operations are small shell scripts run inside the sandbox, as its user, in
   * its mount namespace. Threat: a symlink or `..` planted by sandboxed code pointing at
   * host files. Paths resolve in the sandbox's view, where host files outside the
   * read-only system mounts do not exist, so no path can reach them.
   */
  private async script(s: LocalState, script: string, args: string[], opts: { stdin?: Uint8Array; maxOutput?: number } = {}) {
    return runCaptured({
      argv: this.enterArgs(s, ["/bin/sh", "-c", script, "sh", ...args]),
      env: sandboxEnv({}),
      pidNs: s.pidNs,
      timeoutMs: 30_000,
      maxOutput: opts.maxOutput ?? 4 * 1024 * 1024,
      stdin: opts.stdin,
    });
  }

  async readFile(id: string, state: BackendState, path: string, maxBytes: number): Promise<Uint8Array> {
    const s = this.live(id, state);
    const r = await this.script(
      s,
      'p=$1; [ -e "$p" ] || exit 3; [ -d "$p" ] && exit 4; [ -r "$p" ] || exit 5; n=$(stat -L -c %s -- "$p") || exit 5; [ "$n" -gt "$2" ] && exit 6; exec cat -- "$p"',
      [path, String(maxBytes)],
      { maxOutput: maxBytes + 1 },
    );
    fileStatus(r.exitCode, path, maxBytes);
    return r.stdout;
  }

  async writeFile(id: string, state: BackendState, path: string, data: Uint8Array): Promise<DirEntry> {
    const s = this.live(id, state);
    const r = await this.script(s, 'p=$1; [ -d "$p" ] && exit 4; mkdir -p -- "$(dirname -- "$p")" || exit 5; cat > "$p" || exit 5; realpath -- "$p"', [path], { stdin: data });
    fileStatus(r.exitCode, path, 0, new TextDecoder().decode(r.stderr));
    const full = new TextDecoder().decode(r.stdout).trim() || path;
    return { name: posix.basename(full), type: "file", path: full, size: data.length };
  }

  async remove(id: string, state: BackendState, path: string): Promise<void> {
    const s = this.live(id, state);
    const r = await this.script(s, 'p=$1; [ -e "$p" ] || [ -L "$p" ] || exit 3; rm -rf -- "$p" || exit 5', [path]);
    fileStatus(r.exitCode, path, 0, new TextDecoder().decode(r.stderr));
  }

  async list(id: string, state: BackendState, path: string): Promise<DirEntry[]> {
    const s = this.live(id, state);
    const r = await this.script(s, 'p=$1; [ -e "$p" ] || exit 3; [ -d "$p" ] || exit 7; cd -- "$p" || exit 5; pwd -P; find . -mindepth 1 -maxdepth 1 -printf "%Y\\t%s\\t%f\\0"', [path]);
    fileStatus(r.exitCode, path, 0, new TextDecoder().decode(r.stderr));
    const text = new TextDecoder().decode(r.stdout);
    const nl = text.indexOf("\n");
    const dir = text.slice(0, nl);
    const entries: DirEntry[] = [];
    for (const rec of text.slice(nl + 1).split("\0")) {
      if (!rec) continue;
      const [kind, size, ...rest] = rec.split("\t");
      const name = rest.join("\t");
      const isDir = kind === "d";
      entries.push({ name, type: isDir ? "dir" : "file", path: posix.join(dir, name), ...(isDir ? {} : { size: Number(size) }) });
    }
    return entries.sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * Pause stops every process in the sandbox's pid namespace with SIGSTOP (which cannot
   * be caught or ignored); memory and files stay as they are. One scan of /proc finds
   * the namespace's processes; after that only their children are followed, until
   * every known process is stopped and none has a child we have not stopped, so
   * processes forked during the sweep are caught too.
   */
  async pause(id: string, state: BackendState): Promise<void> {
    const s = this.live(id, state);
    const known = new Set(pidsInNamespace(s.pidNs));
    for (let round = 0; round < 200; round++) {
      let pending = false;
      for (const pid of [...known]) {
        const st = procStat(pid)?.state;
        if (st === undefined || st === "Z" || st === "X") {
          known.delete(pid);
          continue;
        }
        if (st !== "T" && st !== "t") {
          signal(pid, "SIGSTOP");
          pending = true;
        }
        for (const child of childrenOf(pid)) {
          if (!known.has(child)) {
            known.add(child);
            pending = true;
          }
        }
      }
      if (!pending) return;
      await Bun.sleep(round < 10 ? 0 : 2);
    }
    throw new Error(`sandbox ${id}: processes kept running after SIGSTOP`);
  }

  async resume(id: string, state: BackendState): Promise<void> {
    const s = this.live(id, state);
    for (const pid of pidsInNamespace(s.pidNs)) signal(pid, "SIGCONT");
  }

  async destroy(id: string, state: BackendState): Promise<void> {
    const s = state as LocalState;
    if (s.host && s.host !== HOST_ID) throw new Error(`sandbox ${id} runs on another host (${s.host}); not destroyed from here`);
    // Killing a pid namespace's init kills every process in the namespace.
    await this.destroyDir(id, s);
  }

  async liveness(_id: string, state: BackendState): Promise<Liveness> {
    const s = state as LocalState;
    if (s.host !== HOST_ID) return "foreign";
    const st = procStat(s.initPid);
    if (!st || st.startTime !== s.initStart || st.state === "Z") return "gone";
    return st.state === "T" ? "paused" : "running";
  }

  /** Destroys sandbox directories (and their processes) that the database does not list as live. */
  async sweep(liveIds: Set<string>): Promise<void> {
    if (!existsSync(this.opts.root)) return;
    for (const name of readdirSync(this.opts.root)) {
      // Leftover sandboxes, and warm ones of a previous run of the service.
      if (!(name.startsWith("sbx_") || name.startsWith("pool_")) || liveIds.has(name)) continue;
      let state: LocalState | undefined;
      try {
        state = JSON.parse(readFileSync(join(this.opts.root, name, "state.json"), "utf8"));
      } catch {
        state = undefined;
      }
      this.opts.log.warn("removing leftover local sandbox", { sandboxId: name });
      if (!state) killUnfinished(join(this.opts.root, name));
      await this.destroy(name, state ?? { initPid: 0, initStart: -1, hostUid: 0, pidNs: "", host: HOST_ID });
    }
  }
}

/** Kills a sandbox whose start was interrupted: its bwrap (checked by command line) and bwrap's child. */
function killUnfinished(dir: string): void {
  const pid = Number(safeRead(join(dir, "bwrap.pid")));
  if (!Number.isInteger(pid) || pid <= 0) return;
  let cmdline = "";
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return;
  }
  if (!cmdline.includes(dir)) return;
  for (const child of childrenOf(pid)) signal(child, "SIGKILL");
  signal(pid, "SIGKILL");
}

/** The environment of a command: the sandbox's defaults, then the sandbox's envVars. */
function sandboxEnv(envVars: Record<string, string>): Record<string, string> {
  return { HOME: SANDBOX_HOME, PATH: SANDBOX_PATH, USER: "user", LANG: "C.UTF-8", PWD: SANDBOX_HOME, ...envVars };
}

/** Maps the file scripts' exit codes to API errors. */
function fileStatus(code: number, path: string, maxBytes: number, stderr = ""): void {
  switch (code) {
    case 0:
      return;
    case 3:
      throw new BackendError(404, `file not found: ${path}`);
    case 4:
      throw new BackendError(400, `path is a directory: ${path}`);
    case 6:
      throw new BackendError(400, `file is larger than ${maxBytes} bytes: ${path}`);
    case 7:
      throw new BackendError(400, `path is not a directory: ${path}`);
    case 124:
      throw new BackendError(504, `file operation timed out: ${path}`);
    default:
      throw new BackendError(400, `file operation failed on ${path}${stderr.trim() ? `: ${stderr.trim().split("\n").pop()}` : ""}`);
  }
}

async function readyLine(stream: ReadableStream<Uint8Array>, timeoutMs: number): Promise<boolean> {
  const reader = stream.getReader();
  const timer = Bun.sleep(timeoutMs).then(() => "timeout" as const);
  let text = "";
  try {
    for (;;) {
      const r = await Promise.race([reader.read(), timer]);
      if (r === "timeout" || r.done) return false;
      text += new TextDecoder().decode(r.value);
      if (text.includes("ready\n")) return true;
    }
  } finally {
    reader.releaseLock();
    void stream.cancel().catch(() => {});
  }
}

function safeRead(path: string): string {
  try {
    return readFileSync(path, "utf8").slice(0, 2000);
  } catch {
    return "";
  }
}
