import { posix } from "node:path";

/**
 * Pure path logic for cgroups: which hierarchy the host has, where this process sits
 * in it, and where the sandboxes' groups go. Kept free of file access so it can be
 * tested with any /proc text.
 */

export interface CgroupMount {
  /** Where the hierarchy is mounted in this mount namespace. */
  point: string;
  /** The cgroup path that the mount shows at `point` ("/" unless a subtree is bind-mounted). */
  root: string;
}

export interface CgroupMounts {
  v2?: CgroupMount;
  /** v1 hierarchies by controller; co-mounted controllers (cpu,cpuacct) share a mount. */
  v1: Map<string, CgroupMount>;
}

/** Octal escapes (\040 for a space) that mountinfo uses in paths. */
function unescapeMountPath(p: string): string {
  return p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
}

/** cgroup mounts from /proc/self/mountinfo text. */
export function parseCgroupMounts(mountinfo: string): CgroupMounts {
  const out: CgroupMounts = { v1: new Map() };
  for (const line of mountinfo.split("\n")) {
    const sep = line.indexOf(" - ");
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(" ");
    const [fstype, , superOpts = ""] = line.slice(sep + 3).split(" ");
    const mount = { point: unescapeMountPath(left[4] ?? ""), root: unescapeMountPath(left[3] ?? "/") };
    if (fstype === "cgroup2") out.v2 ??= mount;
    else if (fstype === "cgroup") {
      for (const opt of superOpts.split(",")) if (!out.v1.has(opt) && /^[a-z_]+$/.test(opt) && !["rw", "ro"].includes(opt)) out.v1.set(opt, mount);
    }
  }
  return out;
}

/** Controller -> cgroup path from /proc/self/cgroup text; the v2 line is under "". */
export function parseProcCgroup(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[1] === "") out.set("", m[2]);
    for (const c of m[1].split(",")) if (c && !c.startsWith("name=")) out.set(c, m[2]);
  }
  return out;
}

/**
 * Directory of cgroup `path` under `mount`, or undefined when the mount does not show
 * it (a container that bind-mounted another part of the hierarchy).
 */
export function groupDir(mount: CgroupMount, path: string): string | undefined {
  const root = mount.root === "/" ? "" : mount.root.replace(/\/$/, "");
  if (root && path !== root && !path.startsWith(`${root}/`)) return undefined;
  const dir = posix.join(mount.point, path.slice(root.length) || "/");
  return dir.length > 1 ? dir.replace(/\/+$/, "") : dir;
}

/** Names that may become a directory under the sandboxes' parent group. */
export function isGroupName(name: string): boolean {
  return /^[A-Za-z0-9_-]{1,64}$/.test(name);
}

export interface V2Layout {
  /** The service's own group: controllers get enabled here for the groups below. */
  base: string;
  /**
   * Leaf the service moves itself into when its own group holds processes: cgroup v2
   * lets a group with processes (other than the root) enable no controllers for its
   * children.
   */
  serviceLeaf: string | undefined;
  /** Parent of every sandbox group of this service. */
  parent: string;
}

/** Where the v2 groups go, for a service sitting at `ownPath` of the hierarchy mounted as `mount`. */
export function v2Layout(mount: CgroupMount, ownPath: string, parentName: string): V2Layout | undefined {
  let base = groupDir(mount, ownPath);
  if (!base) return undefined;
  // A restarted service may already sit in the leaf an earlier run moved it to.
  if (posix.basename(base) === SERVICE_LEAF && base !== mount.point) base = posix.dirname(base);
  const isRoot = base === mount.point;
  return { base, serviceLeaf: isRoot ? undefined : posix.join(base, SERVICE_LEAF), parent: posix.join(base, parentName) };
}

export const SERVICE_LEAF = "service";

/** The v1 parent group per controller: under the service's own group of each controller. */
export function v1Parents(mounts: CgroupMounts, own: Map<string, string>, controllers: string[], parentName: string): Map<string, string> | string {
  const out = new Map<string, string>();
  for (const c of controllers) {
    const mount = mounts.v1.get(c);
    if (!mount) return `the cgroup v1 '${c}' controller is not mounted`;
    const dir = groupDir(mount, own.get(c) ?? "/");
    if (!dir) return `this process's '${c}' cgroup (${own.get(c)}) is outside the mounted part of that hierarchy (${mount.point})`;
    out.set(c, posix.join(dir, parentName));
  }
  return out;
}

/** "max" or a decimal byte count for a size in MiB. */
export function mib(mb: number): string {
  return String(Math.round(mb * 1024 * 1024));
}

/** CFS quota for `cpus` cores over `periodUs`. */
export function cpuQuotaUs(cpus: number, periodUs: number): number {
  return Math.max(1000, Math.round(cpus * periodUs));
}
