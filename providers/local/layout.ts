import { randomUUID } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LocalTemplate } from "./template";

/** User the sandboxed code runs as, inside the sandbox's user namespace. */
export const SANDBOX_UID = 1000;
export const SANDBOX_HOME = "/home/user";
/** Where a template's `programs` are mounted (read-only), last on the PATH. */
export const PROGRAMS_DIR = "/opt/gateway/bin";
export const SANDBOX_PATH = `/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PROGRAMS_DIR}`;

/**
 * Host files under /etc that programs commonly need (dynamic linker, certificates, time
 * zone, name service config). The rest of the host's /etc is not mounted: it may hold
 * configuration and credentials of other software on the host.
 */
const ETC_FILES = [
  "alternatives",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "ssl",
  "ca-certificates",
  "ca-certificates.conf",
  "localtime",
  "nsswitch.conf",
  "mime.types",
  "os-release",
  "debian_version",
  "profile",
  "bash.bashrc",
  "inputrc",
];

/**
 * Per-sandbox directory on the host: DATA_DIR/sandboxes/<id>, holding its state and the
 * generated /etc files (copied into the sandbox at start). Its home, /tmp and /dev/shm
 * are tmpfs mounts inside the sandbox, not host directories.
 */
export function prepareSandboxDir(root: string, id: string): { dir: string; etc: string } {
  const dir = join(root, id);
  const etc = join(dir, "etc");
  mkdirSync(dir, { mode: 0o700 });
  mkdirSync(etc, { mode: 0o700 });
  writeFileSync(join(etc, "passwd"), `root:x:0:0:root:/root:/bin/sh\nuser:x:${SANDBOX_UID}:${SANDBOX_UID}:user:${SANDBOX_HOME}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`, { mode: 0o644 });
  writeFileSync(join(etc, "group"), `root:x:0:\nuser:x:${SANDBOX_UID}:\nnogroup:x:65534:\n`, { mode: 0o644 });
  writeFileSync(join(etc, "hosts"), "127.0.0.1 localhost sandbox\n::1 localhost\n", { mode: 0o644 });
  // The sandbox's resolver (pasta forwards its 127.0.0.1:53 to the service); without a network nothing answers there.
  writeFileSync(join(etc, "resolv.conf"), "nameserver 127.0.0.1\noptions timeout:2 attempts:2\n", { mode: 0o644 });
  // Shown as /proc/sys/kernel/random/boot_id inside (start.ts).
  writeFileSync(join(etc, "boot_id"), `${randomUUID()}\n`, { mode: 0o644 });
  return { dir, etc };
}

/** bwrap arguments for the read-only system root of a template. */
export function rootfsArgs(template: LocalTemplate): string[] {
  const args: string[] = [];
  const mounts = template.mounts ?? ["/usr"];
  for (const m of mounts) args.push("--ro-bind-try", m, m);
  // Merged-/usr systems have /bin -> usr/bin etc.; mirror what the host has.
  for (const top of ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]) {
    if (!existsSync(top)) continue;
    const st = lstatSync(top);
    if (st.isSymbolicLink()) args.push("--symlink", readlinkSync(top), top);
    else args.push("--ro-bind", top, top);
  }
  for (const f of ETC_FILES) args.push("--ro-bind-try", `/etc/${f}`, `/etc/${f}`);
  for (const [name, path] of Object.entries(template.programs ?? {})) if (path) args.push("--ro-bind", path, `${PROGRAMS_DIR}/${name}`);
  return args;
}
