import { existsSync, readdirSync, readFileSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { detectCgroups, parentGroupName } from "../../providers/local/cgroup/detect";

/**
 * Ends every local sandbox of a test service's data directory and removes its cgroups
 * (sandboxes outlive their service by design). Synchronous, for cleanup hooks.
 * Returns how many processes were killed.
 */
export function endSandboxesUnder(dataDir: string): number {
  const root = join(dataDir, "sandboxes");
  let dirs: string[];
  try {
    dirs = readdirSync(root);
  } catch {
    return 0;
  }
  let killed = 0;
  for (const d of dirs) {
    try {
      const { initPid } = JSON.parse(readFileSync(join(root, d, "state.json"), "utf8")) as { initPid: number };
      process.kill(initPid, "SIGKILL");
      killed++;
    } catch {
      // Gone already, or never started.
    }
  }
  unbindNamespaces(root, dirs);
  const cg = detectCgroups(parentGroupName(root));
  if (typeof cg === "string") return killed;
  for (let round = 0; round < 200; round++) {
    const names = cg.names();
    if (!names.length) break;
    for (const name of names) {
      for (const pid of cg.pids(name)) {
        try {
          process.kill(pid, "SIGKILL");
          killed++;
        } catch {}
      }
      cg.thaw(name);
      for (const file of cg.procsFiles(name)) {
        try {
          rmdirSync(join(file, ".."));
        } catch {}
      }
    }
    Bun.sleepSync(5);
  }
  for (const file of cg.procsFiles("x")) {
    try {
      rmdirSync(join(file, "..", ".."));
    } catch {}
  }
  return killed;
}

/** Sandboxes' network namespaces are bind mounts in their directories (providers/local/network/namespace.ts); unbound so the directory can go. */
function unbindNamespaces(root: string, dirs: string[]): void {
  for (const d of dirs) {
    const path = join(root, d, "netns");
    if (existsSync(path)) Bun.spawnSync(["umount", "-l", path], { stdout: "ignore", stderr: "ignore" });
  }
}
