import { dlopen, FFIType, ptr } from "bun:ffi";
import { lchownSync } from "node:fs";

/**
 * The few file system calls the layer store needs that Node's fs lacks: extended
 * attributes (overlay opaque markers) and character devices 0/0 (overlay whiteouts),
 * straight from the C library.
 */
const libc = dlopen("libc.so.6", {
  lsetxattr: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.i32], returns: FFIType.i32 },
  mknod: { args: [FFIType.ptr, FFIType.u32, FFIType.u64], returns: FFIType.i32 },
  __errno_location: { args: [], returns: FFIType.ptr },
});

const cstr = (s: string) => Buffer.from(`${s}\0`);
const S_IFCHR = 0o020000;

function check(rc: number, what: string, path: string): void {
  if (rc === 0) return;
  const errnoPtr = libc.symbols.__errno_location();
  const errno = errnoPtr ? new Int32Array(require("bun:ffi").toArrayBuffer(errnoPtr, 0, 4))[0] : -1;
  throw new Error(`${what} ${path} failed (errno ${errno})`);
}

/** Marks a directory opaque for overlayfs mounted with `userxattr` (inside a user namespace). */
export function setOpaque(dir: string): void {
  const path = cstr(dir);
  const name = cstr("user.overlay.opaque");
  const value = Buffer.from("y");
  check(libc.symbols.lsetxattr(ptr(path), ptr(name), ptr(value), 1, 0), "setting user.overlay.opaque on", dir);
}

/** An overlayfs whiteout: a character device with device number 0/0. */
export function mknodWhiteout(path: string): void {
  const p = cstr(path);
  check(libc.symbols.mknod(ptr(p), S_IFCHR, 0), "making a whiteout at", path);
}

export function lchown(path: string, uid: number, gid: number): void {
  lchownSync(path, uid, gid);
}
