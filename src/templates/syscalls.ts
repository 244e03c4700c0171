import { dlopen, FFIType, ptr, toArrayBuffer } from "bun:ffi";
import { lchownSync } from "node:fs";

/**
 * The file system calls that Node's fs lacks, straight from the C library: extended
 * attributes (overlay opaque markers), character devices 0/0 (overlay whiteouts), and the
 * mount calls of image sandboxes' roots (id-mapped bind mounts, overlayfs, tmpfs).
 * Linux on x86-64 and arm64 only (the local sandbox backend's platforms).
 */
const libc = dlopen("libc.so.6", {
  lsetxattr: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.i32], returns: FFIType.i32 },
  mknod: { args: [FFIType.ptr, FFIType.u32, FFIType.u64], returns: FFIType.i32 },
  mount: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.ptr], returns: FFIType.i32 },
  umount2: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  syscall: { args: [FFIType.i64, FFIType.i64, FFIType.i64, FFIType.i64, FFIType.i64, FFIType.i64], returns: FFIType.i64 },
  close: { args: [FFIType.i32], returns: FFIType.i32 },
  strerror: { args: [FFIType.i32], returns: FFIType.cstring },
  __errno_location: { args: [], returns: FFIType.ptr },
});

/** open_tree, move_mount, mount_setattr: the same numbers on x86-64 and arm64 (new syscalls share one table). */
const SYS = { open_tree: 428n, move_mount: 429n, mount_setattr: 442n };

const cstr = (s: string) => Buffer.from(`${s}\0`);
const S_IFCHR = 0o020000;

export class SyscallError extends Error {
  constructor(
    what: string,
    readonly errno: number,
  ) {
    super(`${what}: ${String(libc.symbols.strerror(errno))} (errno ${errno})`);
  }
}

function errno(): number {
  const p = libc.symbols.__errno_location();
  return p ? new Int32Array(toArrayBuffer(p, 0, 4))[0]! : -1;
}

function check(rc: number | bigint, what: string): void {
  if (Number(rc) < 0) throw new SyscallError(what, errno());
}

/** Marks a directory opaque for overlayfs (mounted by the root service: trusted.* attributes). */
export function setOpaque(dir: string): void {
  const value = Buffer.from("y");
  check(libc.symbols.lsetxattr(ptr(cstr(dir)), ptr(cstr("trusted.overlay.opaque")), ptr(value), 1, 0), `setting trusted.overlay.opaque on ${dir}`);
}

/** An overlayfs whiteout: a character device with device number 0/0. */
export function mknodWhiteout(path: string): void {
  check(libc.symbols.mknod(ptr(cstr(path)), S_IFCHR, 0), `making a whiteout at ${path}`);
}

export function lchown(path: string, uid: number, gid: number): void {
  lchownSync(path, uid, gid);
}

export const MS_NOSUID = 0x2n;
export const MS_NODEV = 0x4n;

/** mount(2). */
export function mount(source: string, target: string, fstype: string, flags: bigint, data: string): void {
  check(libc.symbols.mount(ptr(cstr(source)), ptr(cstr(target)), ptr(cstr(fstype)), flags, ptr(cstr(data))), `mounting ${fstype} at ${target}`);
}

const MNT_DETACH = 2;
/** Lazy unmount: gone from the host's tree now, freed once no namespace uses it. */
export function unmountDetached(target: string): void {
  check(libc.symbols.umount2(ptr(cstr(target)), MNT_DETACH), `unmounting ${target}`);
}

/**
 * Binds `source` at `target` with its owners shifted through the user namespace `usernsFd`
 * (an id-mapped mount): a file of uid 0 in the layer shows as the namespace's uid 0, i.e.
 * the sandbox's unprivileged host id base. Read-only, nosuid, nodev.
 */
export function idmappedBind(source: string, target: string, usernsFd: number): void {
  const AT_FDCWD = -100n;
  const OPEN_TREE_CLONE = 1n;
  const OPEN_TREE_CLOEXEC = 0o2000000n;
  const AT_EMPTY_PATH = 0x1000n;
  const MOUNT_ATTR_RDONLY = 0x1n;
  const MOUNT_ATTR_NOSUID = 0x2n;
  const MOUNT_ATTR_NODEV = 0x4n;
  const MOUNT_ATTR_IDMAP = 0x100000n;
  const MOVE_MOUNT_F_EMPTY_PATH = 0x4n;
  const empty = cstr("");
  const src = cstr(source);
  const fd = libc.symbols.syscall(SYS.open_tree, AT_FDCWD, BigInt(ptr(src)), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC, 0n, 0n);
  check(fd, `open_tree ${source}`);
  try {
    // struct mount_attr { u64 attr_set, attr_clr, propagation, userns_fd }
    const attr = new BigUint64Array([MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0n, 0n, BigInt(usernsFd)]);
    check(libc.symbols.syscall(SYS.mount_setattr, fd, BigInt(ptr(empty)), AT_EMPTY_PATH, BigInt(ptr(attr)), 32n, 0n), `id-mapping ${source}`);
    const dst = cstr(target);
    check(libc.symbols.syscall(SYS.move_mount, fd, BigInt(ptr(empty)), AT_FDCWD, BigInt(ptr(dst)), MOVE_MOUNT_F_EMPTY_PATH, 0n), `attaching ${source} at ${target}`);
  } finally {
    libc.symbols.close(Number(fd));
  }
}
