import { createHash, randomInt, randomUUID } from "node:crypto";
import { appendFileSync, chmodSync, closeSync, existsSync, lchownSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { idmappedBind, mount, MS_NODEV, MS_NOSUID, unmountDetached } from "../../src/templates/syscalls";
import { SANDBOX_HOME, SANDBOX_UID } from "./layout";

/**
 * The writable root of a sandbox of an image template, made by the root service on the
 * host before bwrap starts:
 *
 *   /run/gateway/sandbox-roots/<service>/<random>/   root's, mode 0710, group the sandbox's id base
 *     l/<i>     each layer of the template, bind-mounted read-only with its owners
 *               shifted onto the sandbox's host id range (id-mapped)
 *     rw/       a tmpfs of the sandbox's disk size, holding
 *       upper/, work/   overlayfs's upper and work directories
 *     root/     the overlay: layers below, upper above; bwrap binds it as /
 *   <sandbox dir>/root.mount   names the directory above, for the sandbox's removal
 *
 * Not under DATA_DIR, which only root may enter: bwrap runs as the sandbox's host ids and
 * must reach root/. No other host user or sandbox can (the group bit), though the host's
 * mountinfo shows the paths; and the sandbox's own mountinfo shows its overlay's options,
 * which name these paths, not DATA_DIR's.
 *
 * Threat: writes reaching the template. Layers are read-only mounts (the id-mapped binds
 * carry MOUNT_ATTR_RDONLY), so nothing the sandbox does, and no overlay copy-up, can
 * change them; every write lands in the sandbox's own upper directory, which no other
 * sandbox sees. Threat: filling the host's disk or memory. The upper directory lives on a
 * tmpfs of the sandbox's disk size (ENOSPC past it), whose pages are charged to the
 * memory cgroup of the sandbox process that writes them, as with the other tmpfs mounts.
 *
 * Ids: the sandbox's user namespace maps its ids 0..65535 onto host ids idBase..idBase+65535,
 * all unprivileged and used by no other sandbox; the layers' files (owned by the image's
 * ids, e.g. 0) appear through the id-mapped mounts as those same host ids, so root inside
 * owns the image's files, and files it writes are stored in the upper directory under
 * host ids of the range.
 */

/** Ids a sandbox's user namespace maps (the usual container range: uid 65534 included). */
export const ID_RANGE = 65536;

/**
 * A host id base for a new sandbox: a multiple of ID_RANGE from 2^30 up, above system and
 * login ids and apart from the single uids of host-/usr sandboxes (below 2^30, start.ts),
 * so no two kinds of sandbox share a host id. (Two image sandboxes get the same range
 * with a chance of one in 16383, as two host-/usr sandboxes may share a uid.)
 */
export function randomIdBase(): number {
  return randomInt(0x4000, 0x7fff) * ID_RANGE;
}

export interface ImageRootPaths {
  lowers: string;
  rw: string;
  upper: string;
  work: string;
  root: string;
}

/** Where sandboxes' roots are mounted (see above). */
export const ROOTS_DIR = "/run/gateway/sandbox-roots";

/** The roots of one service's sandboxes (by its sandboxes directory): a sweep touches its own only. */
export function rootsOf(sandboxesRoot: string): string {
  return join(ROOTS_DIR, createHash("sha256").update(sandboxesRoot).digest("hex").slice(0, 16));
}

function rootFileOf(sandboxDir: string): string {
  return join(sandboxDir, "root.mount");
}

function pathsIn(holder: string): ImageRootPaths {
  const rw = join(holder, "rw");
  return { lowers: join(holder, "l"), rw, upper: join(rw, "upper"), work: join(rw, "work"), root: join(holder, "root") };
}

/** The mounts of a sandbox of an image template; undefined for a host-/usr sandbox. */
export function imageRootPaths(sandboxDir: string): ImageRootPaths | undefined {
  const holder = holderOf(sandboxDir);
  return holder ? pathsIn(holder) : undefined;
}

function holderOf(sandboxDir: string): string | undefined {
  let holder = "";
  try {
    holder = readFileSync(rootFileOf(sandboxDir), "utf8");
  } catch {
    return undefined;
  }
  // Only a path of ours: the file is root's, but a path to unmount and remove is never taken blindly.
  const mine = `${rootsOf(dirname(sandboxDir))}/`;
  return holder.startsWith(mine) && /^[0-9a-f-]{36}$/.test(holder.slice(mine.length)) ? holder : undefined;
}

/**
 * The upper directory of a sandbox of an image template (its writes to the root file
 * system, overlay whiteouts included), for snapshots and for committing it as a layer
 * (LayerStore.commitLayer with the sandbox's idBase). Undefined for a host-/usr sandbox.
 */
export function upperDir(sandboxDir: string): string | undefined {
  const p = imageRootPaths(sandboxDir)?.upper;
  return p && existsSync(p) ? p : undefined;
}

/**
 * Mounts the sandbox's overlay root; `layers` are layer directories, bottom first. The
 * id mapping comes from a user namespace made for it (the sandbox's own is made later,
 * by its unprivileged start chain), which the mounts keep alive.
 */
export async function mountImageRoot(sandboxDir: string, layers: string[], idBase: number, diskBytes: number, unshare: string): Promise<string> {
  const helper = Bun.spawn([unshare, "--user", "--", "/bin/cat"], { stdin: "pipe", stdout: "ignore", stderr: "ignore", env: {}, cwd: "/" });
  let usernsFd: number | undefined;
  try {
    await mapUserNamespace(helper.pid, idBase, 10_000);
    usernsFd = openUserNamespace(helper.pid);
    return mountLayers(sandboxDir, layers, usernsFd, idBase, diskBytes);
  } finally {
    if (usernsFd !== undefined) closeSync(usernsFd);
    helper.kill("SIGKILL");
    await helper.exited;
  }
}

function mountLayers(sandboxDir: string, layers: string[], usernsFd: number, idBase: number, diskBytes: number): string {
  const roots = rootsOf(dirname(sandboxDir));
  mkdirSync(roots, { recursive: true, mode: 0o711 });
  const holder = join(roots, randomUUID());
  // Written before any mount: a crash after it still leaves the path to unmount.
  writeFileSync(rootFileOf(sandboxDir), holder, { mode: 0o600 });
  mkdirSync(holder, { mode: 0o710 });
  chmodSync(holder, 0o710);
  lchownSync(holder, 0, idBase);
  const p = pathsIn(holder);
  mkdirSync(p.lowers, { mode: 0o700 });
  mkdirSync(p.rw, { mode: 0o700 });
  const root = p.root;
  mkdirSync(root, { mode: 0o700 });
  const lowers: string[] = [];
  for (const [i, layer] of layers.entries()) {
    const at = join(p.lowers, String(i));
    mkdirSync(at, { mode: 0o700 });
    idmappedBind(layer, at, usernsFd);
    lowers.unshift(at);
  }
  mount("tmpfs", p.rw, "tmpfs", MS_NOSUID | MS_NODEV, `size=${diskBytes},mode=0700`);
  mkdirSync(p.upper, { mode: 0o755 });
  mkdirSync(p.work, { mode: 0o700 });
  // The root directory of the merged tree is the upper's: owned by the sandbox's root.
  lchownSync(p.upper, idBase, idBase);
  // The options are one page at most (mount(2)); a template with more layers than fit is refused before.
  // No redirects or metacopy followed: a layer's attributes never steer lookups elsewhere.
  const options = `lowerdir=${lowers.join(":")},upperdir=${p.upper},workdir=${p.work},redirect_dir=nofollow,metacopy=off,index=off`;
  mount("overlay", root, "overlay", MS_NOSUID | MS_NODEV, options);
  return root;
}

/** Longest layer list whose overlay mount options (a page at most) fit: each lower is <holder>/l/<i>. */
export function maxLayers(): number {
  const holder = ROOTS_DIR.length + 1 + 16 + 1 + 36;
  return Math.floor((4000 - 2 * (holder + 9) - 60) / (holder + 6));
}

/**
 * The sandbox's default user (uid 1000, `user`, home /home/user) in the image's own
 * /etc/passwd and /etc/group when the image has no uid 1000, and its home. Written into
 * the sandbox's upper layer (the files stay writable: package installs add users).
 */
export function addSandboxUser(root: string, idBase: number): void {
  const etc = join(root, "etc");
  if (!existsSync(etc)) mkdirSync(etc, { mode: 0o755 });
  const shell = existsSync(join(root, "bin/bash")) || existsSync(join(root, "usr/bin/bash")) ? "/bin/bash" : "/bin/sh";
  const ensure = (file: string, line: string, hasId: (fields: string[]) => boolean) => {
    const path = join(etc, file);
    const text = existsSync(path) ? readFileSync(path, "utf8") : "";
    if (text.split("\n").some((l) => hasId(l.split(":")))) return;
    const created = !existsSync(path);
    appendFileSync(path, `${text && !text.endsWith("\n") ? "\n" : ""}${line}\n`);
    if (created) {
      chmodSync(path, 0o644);
      lchownSync(path, idBase, idBase);
    }
  };
  ensure("passwd", `user:x:${SANDBOX_UID}:${SANDBOX_UID}:user:${SANDBOX_HOME}:${shell}`, (f) => f[2] === String(SANDBOX_UID));
  ensure("group", `user:x:${SANDBOX_UID}:`, (f) => f[2] === String(SANDBOX_UID));
  const home = join(root, SANDBOX_HOME);
  if (!existsSync(home)) {
    const parent = join(root, "home");
    if (!existsSync(parent)) {
      mkdirSync(parent, { mode: 0o755 });
      lchownSync(parent, idBase, idBase);
    }
    mkdirSync(home, { mode: 0o755 });
    lchownSync(home, idBase + SANDBOX_UID, idBase + SANDBOX_UID);
  }
}

/**
 * Unmounts a sandbox's root and layers (none for a host-/usr sandbox) and removes the
 * root's mount point; true when nothing is left mounted.
 */
export function unmountSandbox(sandboxDir: string): boolean {
  const holder = holderOf(sandboxDir);
  if (holder) {
    if (!unmountUnder(holder)) return false;
    rmSync(holder, { recursive: true, force: true });
  }
  return unmountUnder(sandboxDir);
}

/**
 * Roots of this service's sandboxes that no sandbox directory names any more (a crash
 * between removing the two): unmounted and removed. Returns how many.
 */
export function sweepOrphanRoots(sandboxesRoot: string, sandboxDirs: string[]): number {
  const roots = rootsOf(sandboxesRoot);
  if (!existsSync(roots)) return 0;
  const named = new Set(sandboxDirs.map((d) => holderOf(d)).filter((h): h is string => !!h));
  let n = 0;
  for (const name of readdirSync(roots)) {
    const holder = join(roots, name);
    if (named.has(holder) || !/^[0-9a-f-]{36}$/.test(name)) continue;
    if (unmountUnder(holder)) rmSync(holder, { recursive: true, force: true });
    n++;
  }
  return n;
}

/** Unmounts everything mounted under `dir` (deepest first); true when nothing is left. */
export function unmountUnder(dir: string): boolean {
  const points = mountsUnder(dir);
  for (const m of points.sort((a, b) => b.length - a.length)) {
    try {
      unmountDetached(m);
    } catch {
      // Reported by the check below.
    }
  }
  return mountsUnder(dir).length === 0;
}

function mountsUnder(dir: string): string[] {
  const prefix = dir.endsWith("/") ? dir : `${dir}/`;
  const out: string[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const point = line.split(" ")[4];
    if (!point) continue;
    // mountinfo escapes space, tab, newline and backslash as octal.
    const path = point.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
    if (path === dir || path.startsWith(prefix)) out.push(path);
  }
  return out;
}

/**
 * Writes the maps of a user namespace that a process of host uid idBase just created:
 * its ids 0..65535 onto host idBase..idBase+65535. Only a process privileged on the host
 * may map a range (the creator alone could map its own uid); the service runs as root.
 */
export async function mapUserNamespace(pid: number, idBase: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  // Unshared once its uid_map reads empty (until then it shows the host's map).
  for (;;) {
    let map: string;
    try {
      map = readFileSync(`/proc/${pid}/uid_map`, "utf8");
    } catch {
      throw new Error("the sandbox's process exited before its user namespace was made");
    }
    if (map === "") break;
    if (Date.now() > deadline) throw new Error("the sandbox's user namespace was not made in time");
    await Bun.sleep(1);
  }
  writeFileSync(`/proc/${pid}/uid_map`, `0 ${idBase} ${ID_RANGE}\n`);
  writeFileSync(`/proc/${pid}/gid_map`, `0 ${idBase} ${ID_RANGE}\n`);
}

export function openUserNamespace(pid: number): number {
  return openSync(`/proc/${pid}/ns/user`, "r");
}


/**
 * The start of an image sandbox, as host argv after `setpriv` (run as host uid idBase):
 * `unshare --user` makes the outer user namespace, which the service maps (above) before
 * writing a line on stdin. Then, with root's capabilities in it, the outer shell limits
 * the namespaces below it to one (threat: nested user namespaces are a common kernel
 * attack surface; root inside cannot raise the limit, which belongs to the outer
 * namespace) and makes that one, the inner namespace, mapped 1:1, in which bwrap runs.
 * Same scheme as bwrap's --disable-userns, which needs bwrap to map the ids itself.
 */
export function imageStartArgv(unshare: string, command: string[]): string[] {
  const outerWait = 'read -r _ || exit 1; exec /bin/sh -c "$0" sh "$@"';
  const outerRun = [
    "u=$1; shift",
    "echo 1 > /proc/sys/user/max_user_namespaces || exit 125",
    "exec 9<&0",
    `"$u" --user -- /bin/sh -c 'until read -r _ < /proc/self/uid_map; do :; done; exec "$@"' sh "$@" 0<&9 9<&- &`,
    "c=$!",
    "exec 9<&-",
    'while read -r _ < /proc/$c/uid_map; do :; done',
    `echo "0 0 ${ID_RANGE}" > /proc/$c/uid_map && echo "0 0 ${ID_RANGE}" > /proc/$c/gid_map || { kill -9 $c; exit 125; }`,
    "wait $c",
  ].join("\n");
  return [unshare, "--user", "--", "/bin/sh", "-c", outerWait, outerRun, unshare, ...command];
}
