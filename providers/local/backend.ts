import { existsSync, mkdirSync, renameSync, rmdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { BackendError, type BackendState, CANCELLED_MARKER, type Cidr, type CreateSpec, type DirEntry, type EgressRules, type ExecResult, type ExecSpec, type FullSandboxBackend, type Liveness, type Logger, type PauseOptions, type ResumeOptions, type SandboxNetworking, type SandboxResources, type SandboxUsage, type SandboxUser, type SpawnedProcess, type SpawnSpec } from "../../src/plugin-api";
import type { LocalTemplate, LocalTemplateFields } from "./template";
import { detectCgroups, parentGroupName } from "./cgroup/detect";
import type { SandboxCgroups } from "./cgroup/types";
import { type LocalLimits, SandboxEntry, sandboxEnv } from "./enter";
import { runCaptured } from "./exec";
import { listDir, readFile, removePath, writeFile } from "./files";
import { CLAUDE_CODE_MISSING } from "../../src/sandboxes/claude-code";
import { HostTools } from "./host-tools";
import { ImageImports } from "./image-imports";
import { SANDBOX_HOME, SANDBOX_PATH } from "./layout";
import { freezeSandbox, thawSandbox } from "./pause";
import { procStat, signal } from "./procfs";
import { SavedFiles } from "./saved-files";
import { spawnStreaming } from "./spawn";
import { LocalNetworks } from "./network";
import { Relays } from "./network/relays";
import type { Upstream } from "./network/upstream";
import type { HostMemory } from "./host-memory";
import { WarmPool } from "./pool";
import type { LayerStore } from "../../src/templates/layers";
import { maxLayers, rootsOf, unmountSandbox, upperDir } from "./rootfs";
import { type Started, startSandbox } from "./start";
import { sweepLeftovers } from "./sweep";
import { HOST_ID, type LocalState, sameMachine } from "./state";
import { archiveWritable, refuseImageFiles, restoreWritable, TMPFS_STATE } from "./writable-state";

export type { LocalLimits } from "./enter";

export interface LocalOptions {
  /** Started sandboxes kept ready per template (0 disables). */
  warmPool: number;
  /** PATH used to find bwrap and util-linux tools (the service's environment). */
  path?: string;
  /** Where per-sandbox directories live (DATA_DIR/sandboxes). */
  root: string;
  limits: LocalLimits;
  /** Run sandboxes without per-sandbox cgroups (no memory, CPU or process limit per sandbox; the operator's explicit choice). */
  withoutCgroups: boolean;
  /** Resources of a template that sets none (see templates.ts). */
  defaultResources: SandboxResources;
  log: Logger;
  /** Host admission: what this host's sandboxes may commit together (host-memory.ts). */
  hostMemory: HostMemory;
  /** Image templates' layers (DATA_DIR/templates/layers); without it, templates naming layers or an image are unavailable. */
  layers?: LayerStore;
  /** Sandboxes get a network namespace each (network/); undefined under SANDBOX_NETWORK=off: none has a network. */
  network?: { upstreams: Upstream[]; operatorAllow: Cidr[] };
}

export const OUTPUT_MARKER = (stream: string, n: number) => `\n[${stream} truncated: output exceeded ${n} bytes]\n`;
export const OOM_MARKER = (mb: number) => `\n[out of memory: the sandbox's memory limit (${mb} MB, files in /home/user, /tmp and /dev/shm included) was reached and the kernel killed a process in the sandbox]\n`;

/**
 * Sandboxes as bubblewrap namespaces on this host, each in a cgroup of its own. Each
 * sandbox is one long-lived bwrap process tree (pid 1 + `sleep infinity`) started in
 * its own session, so it survives restarts of the service; commands and file
 * operations join its cgroup and namespaces (nsenter) instead of starting a new bwrap
 * each time, which keeps a command round trip to a few milliseconds.
 */
export class LocalBackend implements FullSandboxBackend<LocalTemplateFields>, SandboxNetworking {
  /** Its sandboxes are this process's (cgroups under its data directory's parent group): the service makes it a sandbox node. */
  readonly nodeLocal = true;
  /**
   * The service must run as root: it gives each sandbox its own host uid, it joins
   * sandbox namespaces that bwrap creates under two nested user namespaces (the inner one
   * maps the sandbox's uid 1000), which only a process privileged on the host can enter,
   * and it creates cgroups.
   */
  private readonly privileged = process.getuid?.() === 0;
  private readonly tools: HostTools;
  private readonly pool: WarmPool;
  private cgroupState: { cgroups?: SandboxCgroups; problem?: string } | undefined;
  private readonly net: LocalNetworks | undefined;
  private readonly relays = new Relays();
  /** Image templates' layers, imported on first use (image-imports.ts). */
  private readonly images: ImageImports;
  /** How commands, file operations and restores enter a sandbox (enter.ts). */
  private readonly entry: SandboxEntry;
  /** Paused sandboxes' files and snapshots on the host (saved-files.ts). */
  private readonly files: SavedFiles;

  constructor(private readonly opts: LocalOptions) {
    this.tools = new HostTools({ path: opts.path, network: !!opts.network });
    this.images = new ImageImports({ layers: opts.layers, log: opts.log });
    this.entry = new SandboxEntry({ limits: opts.limits, tool: (name) => this.tool(name), cgroups: () => this.cgroups });
    this.files = new SavedFiles({ root: opts.root, log: opts.log });
    this.net = opts.network && new LocalNetworks({ ...opts.network, log: opts.log, tool: (name) => this.tool(name) });
    this.pool = new WarmPool({ size: opts.warmPool, memory: opts.hostMemory, log: opts.log, resources: (t) => this.templateResources(t), start: (t, dir, r) => this.start(t, dir, r), destroy: (dir, s) => this.destroyDir(dir, s).catch((e) => opts.log.warn("warm sandbox not destroyed", { sandbox: dir, err: e })) });
  }

  /** Per-sandbox cgroups, set up once (the first call logs which hierarchy, or why none). */
  private cgroupSetup(): { cgroups?: SandboxCgroups; problem?: string } {
    if (this.cgroupState) return this.cgroupState;
    if (this.opts.withoutCgroups) {
      this.opts.log.warn("local sandboxes run WITHOUT per-sandbox memory, CPU and process limits (providers.local.withoutCgroups)");
      return (this.cgroupState = {});
    }
    const found = detectCgroups(parentGroupName(this.opts.root));
    if (typeof found !== "string") {
      this.opts.log.info("local sandboxes get a cgroup each", { where: found.where });
      return (this.cgroupState = { cgroups: found });
    }
    this.opts.log.error("local sandboxes cannot get a cgroup each; sandbox creation is refused", { reason: found });
    return (this.cgroupState = { problem: `the local sandbox backend cannot create a cgroup per sandbox (${found}); fix that, or run sandboxes without per-sandbox limits with providers.local.withoutCgroups` });
  }

  /** The per-sandbox groups (undefined when running without them). */
  get cgroups(): SandboxCgroups | undefined {
    return this.cgroupSetup().cgroups;
  }

  private tool(name: string): string {
    return this.tools.path(name);
  }

  templateProblem(template: LocalTemplate): string | undefined {
    if (process.platform !== "linux") return `template ${template.id} is unavailable: the local sandbox backend runs on Linux only`;
    if (!this.privileged) return `template ${template.id} is unavailable: the local sandbox backend needs the service to run as root (it starts each sandbox under its own unprivileged uid)`;
    const tool = this.tools.missing();
    if (tool) return `template ${template.id} is unavailable: ${tool}`;
    const cg = this.cgroupSetup().problem;
    if (cg) return `template ${template.id} is unavailable: ${cg}`;
    for (const [name, path] of Object.entries(template.programs ?? {})) {
      if (!path) return `template ${template.id} is unavailable: ${name === "claude" ? CLAUDE_CODE_MISSING : `'${name}' was not found on the host`}`;
      if (!existsSync(path)) return `template ${template.id} is unavailable: '${path}' (program ${name}) does not exist on the host`;
    }
    if (template.layers || template.image) {
      if (!this.opts.layers) return `template ${template.id} is unavailable: this service has no layer store for image templates`;
      const failed = template.image && this.images.failed(template.image);
      if (failed) return `template ${template.id} is unavailable: importing its image failed: ${failed}`;
      if (template.layers) {
        const missing = this.opts.layers.missing(template.layers);
        if (missing.length) return `template ${template.id} is unavailable: ${missing.length} of its layers are not stored (first: ${missing[0]}); import or build it again`;
        const max = maxLayers();
        if (template.layers.length > max) return `template ${template.id} is unavailable: it has ${template.layers.length} layers, more than the ${max} a sandbox root can stack here`;
      }
    }
    for (const program of template.requires ?? []) {
      if (!Bun.which(program, { PATH: SANDBOX_PATH })) {
        return `template ${template.id} is unavailable: '${program}' is not installed on the host (Debian package '${program}')`;
      }
    }
    return undefined;
  }

  /** A template's own resources: what its warm sandboxes start with. */
  private templateResources(t: LocalTemplate): SandboxResources {
    const d = this.opts.defaultResources;
    return { memoryMB: t.memoryMB ?? d.memoryMB, cpuCount: t.cpuCount ?? d.cpuCount, diskSizeMB: t.diskSizeMB ?? d.diskSizeMB, pids: t.pids ?? d.pids };
  }

  async create(spec: CreateSpec<LocalTemplateFields>): Promise<BackendState> {
    const problem = this.templateProblem(spec.template);
    if (problem) throw new BackendError(503, problem);
    mkdirSync(this.opts.root, { recursive: true, mode: 0o700 });
    const dir = join(this.opts.root, spec.sandboxId);
    const resources = spec.resources ?? this.templateResources(spec.template);
    // File system sizes are fixed at mount time; other limits are cgroup files that a
    // warm sandbox takes on as it is handed out.
    const warm = resources.diskSizeMB === this.templateResources(spec.template).diskSizeMB ? this.pool.take(spec.template.id) : undefined;
    this.pool.admit(spec.sandboxId, resources.memoryMB, spec.template.id, warm);
    if (warm) {
      // Bind mounts follow inodes, not paths: renaming a warm sandbox's directory keeps it working.
      renameSync(join(this.opts.root, warm.dir), dir);
      if (warm.state.cgroup && !sameResources(warm.state.resources, resources)) this.cgroups?.setLimits(warm.state.cgroup, resources);
      warm.state.resources = resources;
    }
    const started =
      warm ??
      (await this.start(spec.template, spec.sandboxId, resources).catch((e) => {
        this.opts.hostMemory.release(spec.sandboxId);
        throw e;
      }));
    await this.settle(spec.sandboxId, started, spec.network, spec.fromSnapshot ? this.files.snapshotPath(spec.fromSnapshot) : undefined);
    this.pool.refill(spec.template);
    return { ...started.state, root: this.opts.root };
  }

  /**
   * The last steps of a start: its egress rules, then the files it starts with (a
   * snapshot's, or its own from before a pause), then its release; on a failure the new
   * sandbox is destroyed.
   */
  private async settle(id: string, started: Started, network: EgressRules | undefined, files: string | undefined): Promise<void> {
    try {
      // Its rules are in force before its first command runs.
      if (this.net) await this.net.apply(id, join(this.opts.root, id), this.entry.cgroupJoin(started.state), network ?? NO_EGRESS);
      if (files) await restoreWritable(this.entry, id, started.state, files);
    } catch (e) {
      started.discard();
      await this.destroyDir(id, started.state);
      throw e;
    }
    // From here on the sandbox outlives the service.
    started.release();
  }

  /** `ownLayers`: an image sandbox's own changes from before a pause to disk, above its template's layers. */
  private async start(template: LocalTemplate, dirName: string, resources: SandboxResources, ownLayers: string[] = []): Promise<Started> {
    const net = this.net;
    const network = net && { prepare: (dir: string) => net.prepare(dir), discard: (dir: string) => net.release(dirName, dir) };
    const image = await this.images.imageOf(template);
    return startSandbox({ root: this.opts.root, dirName, template, resources, limitArgs: this.entry.limitArgs(resources), setpriv: this.tool("setpriv"), bwrap: this.tool("bwrap"), unshare: this.tool("unshare"), cgroups: this.cgroups, network, ...(image ? { layers: [...image.layers, ...ownLayers].map((d) => this.opts.layers!.path(d)), imageEnv: image.env } : {}) });
  }

  /** Shutdown: warm sandboxes belong to this process only; client sandboxes stay running. */
  async close(): Promise<void> {
    await this.pool.close();
    this.net?.close();
    // Sandboxes outlive the service and keep the parent group; an empty one goes.
    this.cgroupState?.cgroups?.removeParentIfEmpty();
    // Likewise the directory of image sandboxes' roots (rmdir: only when none is left).
    try {
      rmdirSync(rootsOf(this.opts.root));
    } catch {
      // Missing, or image sandboxes still run.
    }
  }

  private async destroyDir(dir: string, s: LocalState): Promise<void> {
    this.opts.hostMemory.release(dir);
    // The cgroup holds every process of the sandbox, including any that escaped its pid
    // namespace's init (there are none by design, but the group is the ground truth).
    if (s.cgroup && this.cgroups) await this.cgroups.destroy(s.cgroup);
    else if (procStat(s.initPid)?.startTime === s.initStart) signal(s.initPid, "SIGKILL");
    // An empty cgroup is not yet a gone sandbox: its pid namespace's init leaves only once
    // the kernel reaped every process of the namespace (it sleeps in exit meanwhile). A
    // destroy reports success only when the init is gone too, so `stopped` is the truth;
    // otherwise it fails, and is retried.
    const initAlive = () => {
      const st = procStat(s.initPid);
      return !!st && st.startTime === s.initStart && st.state !== "Z" && st.state !== "X";
    };
    for (let i = 0; i < 400 && initAlive(); i++) await Bun.sleep(5);
    if (initAlive()) throw new Error(`sandbox ${dir}: its init process ${s.initPid} has not exited 2 s after its processes were killed`);
    this.relays.forget(dir);
    await this.net?.release(dir, join(this.opts.root, dir));
    // An image sandbox's root and layer mounts go first: a recursive removal never crosses a mount.
    if (!unmountSandbox(join(this.opts.root, dir))) throw new Error(`sandbox ${dir}: its root file system could not be unmounted; its directory is kept`);
    rmSync(join(this.opts.root, dir), { recursive: true, force: true });
  }

  private live(id: string, state: BackendState): LocalState {
    const s = state as LocalState;
    if (s.host !== HOST_ID) throw new BackendError(409, `sandbox ${id} runs on another host (${s.host.split("/")[0]}); use the service there`);
    if (!this.ours(s)) throw new BackendError(409, `sandbox ${id} belongs to another service's data directory on this host; use the service there`);
    const st = procStat(s.initPid);
    // A zombie init (killed, not yet reaped) is as gone as a missing one.
    if (!st || st.startTime !== s.initStart || st.state === "Z" || st.state === "X") throw new BackendError(409, `sandbox ${id} is no longer running on this host`);
    return s;
  }

  /**
   * Whether a sandbox of this host is this service's: two services on one host (other
   * DATA_DIRs) have parent cgroups of their own and must not touch each other's.
   * States written before `root` existed are this host's only service's.
   */
  private ours(s: LocalState): boolean {
    return s.root === undefined || s.root === this.opts.root;
  }

  async exec(id: string, state: BackendState, spec: ExecSpec): Promise<ExecResult> {
    const s = this.live(id, state);
    const max = this.opts.limits.outputBytes;
    const cg = s.cgroup ? this.cgroups : undefined;
    const ooms = cg ? cg.oomKills(s.cgroup!) : 0;
    const r = await runCaptured({ argv: this.entry.enterArgs(s, [spec.cmd, ...spec.args], spec.user), env: sandboxEnv(s, spec.envVars, spec.user), pidNs: s.pidNs, timeoutMs: spec.timeoutMs, maxOutput: max, signal: spec.signal });
    let stdout = new TextDecoder().decode(r.stdout);
    let stderr = new TextDecoder().decode(r.stderr);
    if (r.stdoutTruncated) stdout += OUTPUT_MARKER("stdout", max);
    if (r.stderrTruncated) stderr += OUTPUT_MARKER("stderr", max);
    const outOfMemory = !!cg && cg.oomKills(s.cgroup!) > ooms;
    if (outOfMemory) stderr += OOM_MARKER(s.resources?.memoryMB ?? 0);
    if (r.timedOut) stderr += `\n[command timed out after ${spec.timeoutMs / 1000} s and was killed]\n`;
    else if (r.cancelled) stderr += CANCELLED_MARKER;
    return { stdout, stderr, exitCode: r.exitCode, ...(outOfMemory ? { outOfMemory } : {}) };
  }

  spawn(id: string, state: BackendState, spec: SpawnSpec): SpawnedProcess {
    const s = this.live(id, state);
    // The working directory is entered inside the sandbox, where only its own view of the file system exists.
    const home = spec.user === "root" ? "/root" : SANDBOX_HOME;
    const argv = ["/bin/sh", "-c", 'cd -- "$1" || exit 1; shift; exec "$@"', "sh", spec.cwd || home, ...spec.argv];
    return spawnStreaming(this.entry.enterArgs(s, argv, spec.user), sandboxEnv(s, spec.env, spec.user), s.pidNs);
  }

  usage(_id: string, state: BackendState): SandboxUsage | undefined {
    const s = state as LocalState;
    // Only a group of this host, still there (the metrics scrape asks about every live sandbox).
    if (!s.cgroup || !this.cgroups || s.host !== HOST_ID || !this.cgroups.exists(s.cgroup)) return undefined;
    const cpu = this.cgroups.cpuUsageUs(s.cgroup);
    const mem = this.cgroups.memoryBytes(s.cgroup);
    if (cpu === undefined || mem === undefined) return undefined;
    const net = this.net?.bytes(s.initPid);
    return { cpuUsageUs: cpu, memoryBytes: mem, ...(net ? { networkRxBytes: net.rx, networkTxBytes: net.tx } : {}) };
  }

  async setNetwork(id: string, state: BackendState, rules: EgressRules): Promise<void> {
    const s = this.live(id, state);
    if (!this.net) {
      if (opensNothing(rules)) return;
      throw new BackendError(409, "sandboxes on this service have no network (SANDBOX_NETWORK=off)");
    }
    if (!existsSync(this.net.path(join(this.opts.root, id)))) throw new BackendError(409, `sandbox ${id} was started without a network of its own (SANDBOX_NETWORK was off); create a new sandbox`);
    await this.net.apply(id, join(this.opts.root, id), this.entry.cgroupJoin(s), rules);
  }

  /** A relay to `port` on the sandbox's loopback (network/relays.ts), in its cgroup and namespace, as its host uid. */
  portSocket(id: string, state: BackendState, port: number): Promise<string> {
    const s = this.live(id, state);
    const prefix = [...this.entry.cgroupJoin(s), this.tool("nsenter"), "-t", String(s.initPid), "--net", "--"];
    return this.relays.socket(id, port, { prefix, socat: this.tool("socat"), dir: join(this.opts.root, id, "ports"), hostUid: s.hostUid });
  }

  /** Lets go of layers the layer store is about to collect: warm sandboxes of templates using them are destroyed (src/templates' garbage collection). */
  releaseLayers(layers: Set<string>): Promise<void> {
    return this.pool.dropUsing(layers);
  }

  readFile(id: string, state: BackendState, path: string, maxBytes: number, user: SandboxUser = "user"): Promise<Uint8Array> {
    return readFile(this.entry.runner(this.live(id, state), user), path, maxBytes);
  }

  writeFile(id: string, state: BackendState, path: string, data: Uint8Array, user: SandboxUser = "user"): Promise<DirEntry> {
    return writeFile(this.entry.runner(this.live(id, state), user), path, data);
  }

  remove(id: string, state: BackendState, path: string): Promise<void> {
    return removePath(this.entry.runner(this.live(id, state)), path);
  }

  list(id: string, state: BackendState, path: string): Promise<DirEntry[]> {
    return listDir(this.entry.runner(this.live(id, state)), path);
  }

  /**
   * Pause freezes the sandbox's processes (pause.ts). Then its files go to disk, so
   * that the pause outlives a host reboot (the processes do not: see the README).
   * keepMemory false ends the processes once the files are written: a resume starts
   * the sandbox again with them.
   */
  async pause(id: string, state: BackendState, opts: PauseOptions = { keepMemory: true }): Promise<BackendState> {
    const s = this.live(id, state);
    await freezeSandbox(this.cgroups, id, s);
    const toLayer = !opts.keepMemory && s.idBase !== undefined;
    let ownLayers = s.ownLayers;
    try {
      await archiveWritable(this.tool("tar"), s.initPid, this.files.pausedPath(id), toLayer ? TMPFS_STATE : undefined);
      // An image sandbox's root (its home included): its upper layer becomes a stored layer it starts again on.
      if (toLayer) ownLayers = [...(s.ownLayers ?? []), await this.commitUpper(id, s)];
    } catch (e) {
      thawSandbox(this.cgroups, s);
      throw e;
    }
    if (opts.keepMemory) return s;
    await this.destroyDir(id, s);
    return { ...s, onDisk: true, ...(ownLayers ? { ownLayers } : {}) };
  }

  /** A frozen image sandbox's upper layer as a stored layer (owners shifted back from its id range). */
  private async commitUpper(id: string, s: LocalState): Promise<string> {
    const upper = upperDir(join(this.opts.root, id));
    if (!upper || !this.opts.layers) throw new BackendError(500, `sandbox ${id} has no upper layer to keep`);
    return this.opts.layers.commitLayer(upper, { idBase: s.idBase });
  }

  /**
   * Thaws the kept processes; when there are none (paused to disk, a host reboot since,
   * or `reboot` asked), starts the sandbox again from its template with the files it
   * had, under the same id, and returns its new state.
   */
  async resume(id: string, state: BackendState, _timeoutSec: number, opts?: ResumeOptions): Promise<BackendState> {
    const s = state as LocalState;
    const archive = this.files.pausedPath(id);
    const kept = !s.onDisk && s.host === HOST_ID && this.running(s);
    if (kept && !opts?.reboot) {
      thawSandbox(this.cgroups, s);
      // From now on the processes change the files; the copy on disk is stale.
      rmSync(archive, { force: true });
      return s;
    }
    if (!existsSync(archive)) throw new BackendError(409, `sandbox ${id} is no longer on this host: its processes and its files are gone`);
    if (!opts) throw new BackendError(409, `sandbox ${id} must be started again from its files, which needs its template`);
    if (!sameMachine(s.host)) throw new BackendError(409, `sandbox ${id} was paused on another host (${s.host.split("/")[0]}); use the service there`);
    // What is left of it: kept processes (a reboot was asked), or a directory from before a host reboot.
    if (existsSync(join(this.opts.root, id))) await this.destroyDir(id, s);
    const template = opts.template as LocalTemplate;
    const resources = s.resources ?? this.templateResources(template);
    this.pool.admit(id, resources.memoryMB, template.id, undefined);
    const missing = this.opts.layers?.missing(s.ownLayers ?? []) ?? [];
    if (missing.length) throw new BackendError(409, `sandbox ${id}'s root file system layers are gone from this host (${missing[0]!.slice(0, 12)})`);
    const started = await this.start(template, id, resources, s.ownLayers).catch((e) => {
      this.opts.hostMemory.release(id);
      throw e;
    });
    await this.settle(id, started, opts.network, archive);
    rmSync(archive, { force: true });
    return { ...started.state, ...(s.ownLayers ? { ownLayers: s.ownLayers } : {}) };
  }

  /**
   * Copies a sandbox's files as a snapshot: a running one is frozen for the copy, so the
   * snapshot is one moment of it; a paused one's files are those it was paused with.
   */
  async snapshot(id: string, state: BackendState, snapshotId: string): Promise<number> {
    const dest = this.files.snapshotPath(snapshotId);
    const s = state as LocalState;
    const paused = this.files.pausedPath(id);
    if (s.onDisk || (s.host !== HOST_ID && existsSync(paused))) return this.files.snapshotPaused(id, snapshotId);
    const live = this.live(id, state);
    refuseImageFiles(live, "a snapshot");
    const wasFrozen = live.cgroup && this.cgroups ? this.cgroups.frozen(live.cgroup) : procStat(live.initPid)?.state === "T";
    if (!wasFrozen) await freezeSandbox(this.cgroups, id, live);
    try {
      return await archiveWritable(this.tool("tar"), live.initPid, dest);
    } finally {
      if (!wasFrozen) thawSandbox(this.cgroups, live);
    }
  }

  async deleteSnapshot(snapshotId: string): Promise<void> {
    this.files.deleteSnapshot(snapshotId);
  }

  async sweepSnapshots(keep: Set<string>): Promise<void> {
    this.files.sweepSnapshots(keep);
  }

  private running(s: LocalState): boolean {
    const st = procStat(s.initPid);
    return !!st && st.startTime === s.initStart && st.state !== "Z" && st.state !== "X";
  }

  async destroy(id: string, state: BackendState): Promise<void> {
    const s = state as LocalState;
    rmSync(this.files.pausedPath(id), { force: true });
    // Paused to disk, or paused before a reboot of this host: its files were all there was.
    if (s.onDisk || (s.host && s.host !== HOST_ID && sameMachine(s.host))) return;
    if (s.host && s.host !== HOST_ID) throw new Error(`sandbox ${id} runs on another host (${s.host}); not destroyed from here`);
    if (!this.ours(s)) throw new Error(`sandbox ${id} belongs to another service's data directory on this host (${s.root}); not destroyed from here`);
    // Killing a pid namespace's init kills every process in the namespace; the cgroup's
    // kill covers the rest.
    await this.destroyDir(id, s);
  }

  async liveness(id: string, state: BackendState): Promise<Liveness> {
    const s = state as LocalState;
    // Paused with its files on this host's disk: it resumes from them, whatever became of its processes.
    const onDisk = existsSync(this.files.pausedPath(id)) && sameMachine(s.host);
    if (s.onDisk) return onDisk ? "paused" : "gone";
    if (s.host !== HOST_ID) return onDisk ? "paused" : "foreign";
    // Another service's data directory on this host (another sandbox node): not ours to judge.
    if (!this.ours(s)) return "foreign";
    if (!this.running(s) && onDisk) return "paused";
    const st = procStat(s.initPid);
    if (!st || st.startTime !== s.initStart || st.state === "Z") return "gone";
    if (s.cgroup && this.cgroups) return this.cgroups.frozen(s.cgroup) ? "paused" : "running";
    return st.state === "T" ? "paused" : "running";
  }

  /** Destroys sandbox directories and cgroups (and their processes) that the database does not list as live (sweep.ts). */
  async sweep(liveIds: Set<string>): Promise<void> {
    await sweepLeftovers(liveIds, {
      root: this.opts.root, log: this.opts.log, hostMemory: this.opts.hostMemory, defaultResources: this.opts.defaultResources,
      net: this.net,
      files: this.files,
      cgroups: () => this.cgroups,
      running: (s) => this.running(s),
      destroyDir: (dir, s) => this.destroyDir(dir, s),
      destroy: (id, s) => this.destroy(id, s),
    });
  }
}

const NO_EGRESS: EgressRules = { internet: false, allowCidrs: [], allowDomains: [], denyCidrs: [] };

function opensNothing(r: EgressRules): boolean {
  return !r.internet && !r.allowCidrs.length && !r.allowDomains.length;
}

function sameResources(a: SandboxResources | undefined, b: SandboxResources): boolean {
  return !!a && a.memoryMB === b.memoryMB && a.cpuCount === b.cpuCount && a.diskSizeMB === b.diskSizeMB && a.pids === b.pids;
}
