import { closeSync, existsSync, openSync, rmSync } from "node:fs";
import { run } from "./run";

/**
 * A sandbox's network namespace, created by the service (root) before the sandbox starts
 * and kept alive by a bind mount on a file of the sandbox's directory (as `ip netns add`
 * does under /run/netns, but scoped to the data directory, so one service's sweep never
 * touches another's). bwrap starts inside it instead of making its own.
 *
 * Threat: sandboxed code rewriting its own firewall. The namespace belongs to the host's
 * initial user namespace; the sandbox's user namespace (made later by bwrap, unprivileged)
 * holds no capability over it, so routes, interfaces and nftables are out of its reach.
 */

/** Creates the namespace at `path` with its loopback up and `ruleset` loaded, in one step. */
export async function createNamespace(tools: { unshare: string; ip: string; nft: string }, path: string, ruleset: string): Promise<void> {
  closeSync(openSync(path, "w", 0o600));
  // unshare runs the command inside the new namespace, then leaves it bound to `path`.
  await run([tools.unshare, `--net=${path}`, "--", "/bin/sh", "-c", 'set -e; "$1" link set lo up; "$2" -f -', "sh", tools.ip, tools.nft], ruleset, "creating the network namespace");
}

/** Unbinds and removes the namespace file (the namespace ends with its last process); nothing to do when it is gone. */
export async function removeNamespace(umount: string, path: string): Promise<void> {
  if (!existsSync(path)) return;
  // Lazy: a process that still holds the namespace (a dying sandbox) does not block it.
  await run([umount, "-l", path], undefined, "unbinding the network namespace").catch(() => {});
  rmSync(path, { force: true });
}

/** argv prefix that runs a command inside the namespace (as root). */
export function enterNamespace(nsenter: string, path: string): string[] {
  return [nsenter, `--net=${path}`, "--"];
}
