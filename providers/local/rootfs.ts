import { randomInt } from "node:crypto";
import { appendFileSync, chmodSync, closeSync, existsSync, lchownSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { idmappedBind, mount, MS_NODEV, MS_NOSUID, unmountDetached } from "../../src/templates/syscalls";
import { SANDBOX_HOME, SANDBOX_UID } from "./layout";

/**
 * The writable root of a sandbox of an image template, made by the root service on the
 * host before bwrap starts:
 *
 *   <sandbox dir>/l/<i>     each layer of the template, bind-mounted read-only with its
 *                           owners shifted onto the sandbox's host id range (id-mapped)
 *   <sandbox dir>/rw        a tmpfs of the sandbox's disk size, holding
 *     upper/, work/         overlayfs's upper and work directories
 *   <sandbox dir>/root      the overlay: layers below, upper above; bwrap binds it as /
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

/** A host id base for a new sandbox: a multiple of ID_RANGE well above system and login ids. */
export function randomIdBase(): number {
  return randomInt(0x20, 0x3fff) * ID_RANGE;
}

export interface ImageRootPaths {
  lowers: string;
  rw: string;
  upper: string;
  work: string;
  root: string;
}

export function imageRootPaths(sandboxDir: string): ImageRootPaths {
  const rw = join(sandboxDir, "rw");
  return { lowers: join(sandboxDir, "l"), rw, upper: join(rw, "upper"), work: join(rw, "work"), root: join(sandboxDir, "root") };
}

/**
 * The upper directory of a sandbox of an image template (its writes to the root file
 * system, overlay whiteouts included), for snapshots and for committing it as a layer
 * (LayerStore.commitLayer with the sandbox's idBase). Undefined for a host-/usr sandbox.
 */
export function upperDir(sandboxDir: string): string | undefined {
  const p = imageRootPaths(sandboxDir).upper;
  return existsSync(p) ? p : undefined;
}

/** Mounts the sandbox's overlay root; `layers` are layer directories, bottom first. */
export function mountImageRoot(sandboxDir: string, layers: string[], usernsFd: number, idBase: number, diskBytes: number): string {
  const p = imageRootPaths(sandboxDir);
  mkdirSync(p.lowers, { mode: 0o700 });
  mkdirSync(p.rw, { mode: 0o700 });
  mkdirSync(p.root, { mode: 0o700 });
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
  const options = `lowerdir=${lowers.join(":")},upperdir=${p.upper},workdir=${p.work},redirect_dir=off,metacopy=off,index=off`;
  mount("overlay", p.root, "overlay", MS_NOSUID | MS_NODEV, options);
  return p.root;
}

/** Longest layer list that fits the overlay's mount options for a sandbox directory of this length. */
export function maxLayers(sandboxDirLength: number): number {
  return Math.floor((4000 - 3 * sandboxDirLength - 100) / (sandboxDirLength + 6));
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
    mkdirSync(home, { mode: 0o750 });
    lchownSync(home, idBase + SANDBOX_UID, idBase + SANDBOX_UID);
  }
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

export { closeSync };

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
