import { randomInt } from "node:crypto";
import { closeSync, openSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BackendError, type SandboxResources } from "../../src/plugin-api";
import type { LocalTemplate } from "./template";
import type { SandboxCgroups } from "./cgroup/types";
import { prepareSandboxDir, rootfsArgs, SANDBOX_HOME, SANDBOX_PATH, SANDBOX_UID } from "./layout";
import { addSandboxUser, imageStartArgv, mapUserNamespace, mountImageRoot, randomIdBase, unmountSandbox } from "./rootfs";
import { lines } from "../../src/streams/lines";
import { childrenOf, descendantsOf, pidNamespace, procStat, signal } from "./procfs";
import { INIT_SCRIPT, startHeartbeat } from "./heartbeat";
import { HOST_ID, joinCgroupArgs, type LocalState, safeRead } from "./state";

const READY_TIMEOUT_MS = 10_000;
const MIB = 1024 * 1024;

export interface StartOptions {
  root: string;
  dirName: string;
  template: LocalTemplate;
  resources: SandboxResources;
  /** prlimit argv prefix (rlimits). */
  limitArgs: string[];
  setpriv: string;
  bwrap: string;
  /** util-linux unshare (image templates: the sandbox's user namespaces). */
  unshare?: string;
  /** Layer directories of an image template, bottom first; undefined: the host-/usr root. */
  layers?: string[];
  /** An image template's environment, kept in the sandbox's state for its commands. */
  imageEnv?: Record<string, string>;
  cgroups: SandboxCgroups | undefined;
  /** Makes the network namespace to start in (network/), returning the argv prefix that enters it; none: bwrap's own, loopback only. */
  network?: { prepare: (dir: string) => Promise<string[]>; discard: (dir: string) => Promise<void> };
}

export interface Started {
  state: LocalState;
  /** Lets it outlive the service (see the script of pid 1). */
  release: () => void;
  /** Still waiting for its release, and sure to get it in time (a stale one is not handed out). */
  fresh: () => boolean;
  /** No more heartbeat: it exits by itself (used with a kill, or when it is dropped). */
  discard: () => void;
}

/** bwrap's arguments; passed through a file descriptor so that nothing inside shows them. */
function bwrapArgs(template: LocalTemplate, r: SandboxResources, etcFds: { passwd: number; group: number; hosts: number; resolv: number; bootId: number }, network: boolean): string[] {
  const disk = String(r.diskSizeMB * MIB);
  return [
    // Threats: host processes, host network (the service and its database listen on
    // 127.0.0.1), System V IPC, hostname and the host's cgroup tree. New user, pid, mount,
    // ipc, uts, net and cgroup namespaces; the sandbox's loopback is its own. With a
    // network, the net namespace is the one the service made (bwrap starts inside it).
    "--unshare-all",
    ...(network ? ["--share-net"] : []),
    "--unshare-user",
    "--unshare-cgroup",
    "--uid", String(SANDBOX_UID),
    "--gid", String(SANDBOX_UID),
    // Nested user namespaces are a common kernel attack surface; nothing in a sandbox needs them.
    "--disable-userns",
    "--hostname", "sandbox",
    // Threat: TIOCSTI keystroke injection into a controlling terminal.
    "--new-session",
    ...rootfsArgs(template),
    // Copied in from descriptors: a bind mount of a host file would show its host path
    // (DATA_DIR) in /proc/self/mountinfo.
    "--ro-bind-data", String(etcFds.passwd), "/etc/passwd",
    "--ro-bind-data", String(etcFds.group), "/etc/group",
    "--ro-bind-data", String(etcFds.hosts), "/etc/hosts",
    "--ro-bind-data", String(etcFds.resolv), "/etc/resolv.conf",
    "--proc", "/proc",
    // Its own boot id, new at each start as a VM's is at each boot (a resume from disk is a
    // new start, a memory-kept resume is not: E2B's tests tell the two apart by it). Threat:
    // the host's boot id identifies the host across sandboxes.
    "--ro-bind-data", String(etcFds.bootId), "/proc/sys/kernel/random/boot_id",
    "--dev", "/dev",
    // Threat: filling the host's memory or disk through files. Every writable place is
    // a tmpfs of its own size; its pages are charged to the sandbox's memory cgroup, so
    // files count in the sandbox's memory limit too. Past the size: ENOSPC inside.
    "--perms", "1777", "--size", disk, "--tmpfs", "/dev/shm",
    "--perms", "0700", "--size", disk, "--tmpfs", SANDBOX_HOME,
    "--perms", "1777", "--size", disk, "--tmpfs", "/tmp",
    // bwrap's /dev is itself a tmpfs without a size: only its device nodes and the
    // mounts above are for the sandbox.
    "--remount-ro", "/dev",
    // Threat: writing to the system root. bwrap's root is a tmpfs; make it read-only
    // once everything is mounted.
    "--remount-ro", "/",
    "--chdir", SANDBOX_HOME,
    "--clearenv",
    "--setenv", "HOME", SANDBOX_HOME,
    "--setenv", "PATH", SANDBOX_PATH,
  ];
}

/**
 * bwrap's arguments for an image template. bwrap runs as root of the sandbox's inner user
 * namespace (rootfs.ts), which maps the sandbox's 65536 ids onto its unprivileged host
 * range: it makes the remaining namespaces itself and needs no --unshare-user. The root
 * is the sandbox's overlay (writable, its upper layer on a tmpfs of the disk size), not a
 * tmpfs with read-only binds.
 */
function imageBwrapArgs(root: string, r: SandboxResources, fds: { hosts: number; resolv: number; bootId: number }, network: boolean): string[] {
  const disk = String(r.diskSizeMB * MIB);
  return [
    // Threats as for the host-/usr root (bwrapArgs): host processes, host network, IPC,
    // hostname, the host's cgroup tree.
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup",
    ...(network ? [] : ["--unshare-net"]),
    "--hostname", "sandbox",
    "--new-session",
    // pid 1 needs no capability; commands get root's (inside the namespace only) by nsenter.
    "--cap-drop", "ALL",
    "--bind", root, "/",
    "--ro-bind-data", String(fds.hosts), "/etc/hosts",
    "--ro-bind-data", String(fds.resolv), "/etc/resolv.conf",
    "--proc", "/proc",
    // Its own boot id, as for the host-/usr root (bwrapArgs).
    "--ro-bind-data", String(fds.bootId), "/proc/sys/kernel/random/boot_id",
    "--dev", "/dev",
    "--perms", "1777", "--size", disk, "--tmpfs", "/dev/shm",
    "--perms", "1777", "--size", disk, "--tmpfs", "/tmp",
    "--remount-ro", "/dev",
    "--chdir", SANDBOX_HOME,
    "--clearenv",
    "--setenv", "HOME", SANDBOX_HOME,
    "--setenv", "PATH", SANDBOX_PATH,
  ];
}

/** pid 1's command: waits for "go" under the service's heartbeat (heartbeat.ts), then settles down. */
const INIT_COMMAND = ["/bin/sh", "-c", INIT_SCRIPT];

/** Starts one sandbox (its cgroup, bwrap and bwrap's long-lived pid 1) in root/<dirName>. */
export async function startSandbox(o: StartOptions): Promise<Started> {
  // A fresh host uid per sandbox: RLIMIT_NPROC counts per uid, and files of one
  // sandbox are unreadable to the uid of another even if a path leaked. An image
  // sandbox gets a range of ids (its root and its user), starting at idBase.
  const image = o.layers;
  const idBase = image ? randomIdBase() : undefined;
  const hostUid = idBase !== undefined ? idBase + SANDBOX_UID : randomInt(0x100000, 0x3fffffff);
  const paths = prepareSandboxDir(o.root, o.dirName);
  const cgroup = o.cgroups ? o.dirName : undefined;
  if (o.cgroups && cgroup) o.cgroups.create(cgroup, o.resources);
  const fds: number[] = [];
  const open = (path: string) => {
    const fd = openSync(path, "r");
    fds.push(fd);
    return fd;
  };
  let proc: ReturnType<typeof Bun.spawn> | undefined;
  let rootPath: string | undefined;
  try {
    const enterNetwork = o.network ? await o.network.prepare(paths.dir) : [];
    if (image && idBase !== undefined) {
      // The root, mounted before bwrap starts where bwrap, running as the sandbox's
      // unprivileged host ids, can reach it (rootfs.ts).
      const root = await mountImageRoot(paths.dir, image, idBase, o.resources.diskSizeMB * MIB, o.unshare!);
      addSandboxUser(root, idBase);
      rootPath = root;
    }
    // Only the files bwrap reads are passed: any other descriptor would stay open in the sandbox's pid 1, its host path visible.
    const etcFiles = image ? ["hosts", "resolv.conf", "boot_id"] : ["passwd", "group", "hosts", "resolv.conf", "boot_id"];
    const args = image
      ? imageBwrapArgs(rootPath!, o.resources, { hosts: 4, resolv: 5, bootId: 6 }, !!o.network)
      : bwrapArgs(o.template, o.resources, { passwd: 4, group: 5, hosts: 6, resolv: 7, bootId: 8 }, !!o.network);
    writeFileSync(join(paths.dir, "bwrap.args"), `${args.join("\0")}\0`, { mode: 0o600 });
    const stdio = [open(join(paths.dir, "bwrap.args")), ...etcFiles.map((f) => open(join(paths.etc, f)))];
    const bwrap = [o.bwrap, "--args", "3", "--", ...INIT_COMMAND];
    if (image && !o.unshare) throw new BackendError(500, "image templates need util-linux unshare");
    const argv = [
      // Into the sandbox's cgroup first, as root; everything below inherits it, and
      // bwrap's cgroup namespace is rooted there.
      ...joinCgroupArgs(cgroup && o.cgroups ? o.cgroups.procsFiles(cgroup) : []),
      ...o.limitArgs,
      ...enterNetwork,
      // bwrap itself runs unprivileged, as the sandbox's own host uid (an image sandbox's: its id base, root inside).
      o.setpriv, `--reuid=${idBase ?? hostUid}`, `--regid=${idBase ?? hostUid}`, "--clear-groups", "--",
      // The sandbox's pid 1 is a copy of this process: its command line is all that
      // shows inside, and it must not name host paths.
      ...(image ? imageStartArgv(o.unshare!, bwrap) : bwrap),
    ];
    // detached: a new session, so a terminal's Ctrl-C or a signal to the service's process
    // group does not reach sandboxes, and they outlive the service. stderr is a pipe, not
    // a log file: a file's host path would show in /proc/1/fd inside.
    proc = Bun.spawn(argv, { stdio: ["pipe", "pipe", "pipe", ...stdio], env: {}, cwd: "/", detached: true });
    for (const fd of fds.splice(0)) closeSync(fd);
    // Until state.json exists, this is how start-up reconciliation finds a sandbox whose
    // creation a crash interrupted (pid and start time, against pid reuse).
    writeFileSync(join(paths.dir, "bwrap.pid"), `${proc.pid} ${procStat(proc.pid)?.startTime ?? -1}`, { mode: 0o600 });
    if (image && idBase !== undefined) {
      // The outer user namespace mapped, then the go-ahead line (rootfs.ts).
      await mapUserNamespace(proc.pid, idBase, READY_TIMEOUT_MS);
      const sink = proc.stdin as import("bun").FileSink;
      sink.write("rootfs\n");
      await sink.flush();
    }
    proc.unref();
    const stdin = proc.stdin as import("bun").FileSink;
    const ready = await readyLine(proc.stdout as ReadableStream<Uint8Array>, READY_TIMEOUT_MS);
    if (!ready) {
      const log = await Promise.race([new Response(proc.stderr as ReadableStream<Uint8Array>).text(), Bun.sleep(500).then(() => "")]);
      throw new BackendError(500, `sandbox failed to start${log.trim() ? `: ${log.trim()}` : ""}`);
    }
    void (proc.stderr as ReadableStream<Uint8Array>).cancel().catch(() => {});
    // prlimit and setpriv exec, so proc.pid is bwrap itself; its one child is the
    // sandbox's pid 1. An image sandbox's bwrap is the one child of the outer shell.
    const bwrapPid = image ? childrenOf(proc.pid)[0] : proc.pid;
    const initPid = bwrapPid ? childrenOf(bwrapPid)[0] : undefined;
    const st = initPid ? procStat(initPid) : undefined;
    const pidNs = initPid ? pidNamespace(initPid) : undefined;
    if (!initPid || !st || !pidNs) throw new BackendError(500, "sandbox failed to start: its init process vanished");
    const state: LocalState = { initPid, initStart: st.startTime, hostUid, pidNs, host: HOST_ID, resources: o.resources, ...(cgroup ? { cgroup } : {}), ...(idBase !== undefined ? { idBase, imageEnv: o.imageEnv ?? {} } : {}) };
    // Read back by start-up reconciliation, which must find (and kill) leftovers.
    // Written whole or not at all (a crash mid-write must not leave half a file).
    writeFileSync(join(paths.dir, "state.json.tmp"), JSON.stringify(state), { mode: 0o600 });
    renameSync(join(paths.dir, "state.json.tmp"), join(paths.dir, "state.json"));
    const heartbeat = startHeartbeat(stdin, () => procStat(initPid)?.startTime === st.startTime);
    return { state, release: heartbeat.release, fresh: heartbeat.fresh, discard: heartbeat.stop };
  } catch (e) {
    for (const fd of fds) closeSync(fd);
    if (proc) {
      // Children first: once bwrap is dead its child (the sandbox's pid 1, which ignores
      // every signal but SIGKILL) is reparented and no longer found under it. And stdin
      // closed: a pid 1 the kill missed reads end-of-file and exits instead of waiting.
      const children = descendantsOf(proc.pid);
      for (const c of children) signal(c, "SIGKILL");
      proc.kill("SIGKILL");
      for (const c of descendantsOf(proc.pid)) if (!children.includes(c)) signal(c, "SIGKILL");
      void Promise.resolve((proc.stdin as import("bun").FileSink).end()).catch(() => {});
    }
    if (o.cgroups && cgroup) await o.cgroups.destroy(cgroup).catch(() => {});
    await o.network?.discard(paths.dir).catch(() => {});
    // Never a recursive removal across a mount (an image sandbox's root, its layers).
    if (unmountSandbox(paths.dir)) rmSync(paths.dir, { recursive: true, force: true });
    throw e;
  }
}

/** Kills a sandbox whose start was interrupted: its bwrap (checked by pid and start time) and bwrap's child. */
export function killUnfinished(dir: string): void {
  const [pid, start] = safeRead(join(dir, "bwrap.pid")).trim().split(" ").map(Number);
  if (!Number.isInteger(pid) || pid <= 0 || procStat(pid)?.startTime !== start) return;
  for (const child of descendantsOf(pid)) signal(child, "SIGKILL");
  signal(pid, "SIGKILL");
}

async function readyLine(stream: ReadableStream<Uint8Array>, timeoutMs: number): Promise<boolean> {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), timeoutMs);
  try {
    // Lines of at most a few bytes: "ready" comes before anything the sandbox runs.
    for await (const line of lines(stream, { maxBytes: 256, signal: stop.signal })) if (line.text === "ready") return true;
    return false;
  } finally {
    clearTimeout(timer);
    void stream.cancel().catch(() => {});
  }
}
