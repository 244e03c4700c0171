import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger, SandboxResources } from "../../src/plugin-api";
import type { SandboxCgroups } from "./cgroup/types";
import type { HostMemory } from "./host-memory";
import type { LocalNetworks } from "./network";
import { sweepOrphanRoots } from "./rootfs";
import type { SavedFiles } from "./saved-files";
import { killUnfinished } from "./start";
import { HOST_ID, type LocalState } from "./state";

/** What the start-up sweep needs of the backend: its places, its ledger, and how it destroys a sandbox. */
export interface SweepDeps {
  root: string;
  log: Logger;
  hostMemory: HostMemory;
  defaultResources: SandboxResources;
  net: LocalNetworks | undefined;
  files: SavedFiles;
  cgroups: () => SandboxCgroups | undefined;
  running: (s: LocalState) => boolean;
  destroyDir: (dir: string, s: LocalState) => Promise<void>;
  destroy: (id: string, s: LocalState) => Promise<void>;
}

/**
 * The start-up sweep: sandboxes outlive the service, so after a restart (or a crash, or
 * a host reboot) this host holds directories, cgroups, root mounts and paused files of
 * sandboxes the database no longer lists, next to those it does. The sweep keeps the
 * live ones (their ledger entries and networks rebuilt) and destroys the rest.
 */
export async function sweepLeftovers(liveIds: Set<string>, d: SweepDeps): Promise<void> {
  const keepGroups = new Set<string>();
  for (const name of existsSync(d.root) ? readdirSync(d.root) : []) {
    // Leftover sandboxes, and warm ones of a previous run of the service.
    if (!(name.startsWith("sbx_") || name.startsWith("pool_"))) continue;
    const state = readState(join(d.root, name));
    if (liveIds.has(name)) {
      // Paused, its processes gone (a host reboot), its files on disk: what is left of it goes; a resume starts it again.
      if (state && !d.running(state) && existsSync(d.files.pausedPath(name))) {
        await d.destroyDir(name, state);
        continue;
      }
      if (state?.cgroup) keepGroups.add(state.cgroup);
      // The host ledger is per process: rebuilt from what still runs here.
      if (state?.host === HOST_ID) d.hostMemory.force(name, state.resources?.memoryMB ?? d.defaultResources.memoryMB);
      await d.net?.restore(name, join(d.root, name));
      continue;
    }
    d.log.warn("removing leftover local sandbox", { sandboxId: name });
    if (!state) killUnfinished(join(d.root, name));
    await d.destroy(name, state ?? { initPid: 0, initStart: -1, hostUid: 0, pidNs: "", host: HOST_ID, cgroup: name });
  }
  // Image sandboxes' roots whose directory is gone (likewise).
  const dirs = existsSync(d.root) ? readdirSync(d.root).map((n) => join(d.root, n)) : [];
  const orphans = sweepOrphanRoots(d.root, dirs);
  if (orphans) d.log.warn("removed leftover sandbox root mounts", { count: orphans });
  // Files of paused sandboxes that are no longer live (a crash between a kill's commit and its destroy).
  d.files.sweepPaused(liveIds);
  // Groups whose directory is gone (a crash between the two removals).
  const cg = d.cgroups();
  for (const group of cg?.names() ?? []) {
    if (keepGroups.has(group)) continue;
    d.log.warn("removing leftover sandbox cgroup", { cgroup: group });
    await cg!.destroy(group);
  }
}

function readState(dir: string): LocalState | undefined {
  try {
    return JSON.parse(readFileSync(join(dir, "state.json"), "utf8"));
  } catch {
    return undefined;
  }
}
