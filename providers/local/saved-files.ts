import { copyFileSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { BackendError, type Logger } from "../../src/plugin-api";

/**
 * Where the archives of sandboxes' files (writable-state.ts) live on the host: those of
 * paused sandboxes (DATA_DIR/sandboxes/.paused) and snapshots (.snapshots), both outside
 * any sandbox's directory, which a pause to disk or a destroy removes. Their names, their
 * copies and the removal of those nothing refers to any more are decided here.
 */
export class SavedFiles {
  constructor(private readonly opts: { root: string; log: Logger }) {}

  /** Where a paused sandbox's files are kept: outside its directory, which a pause to disk removes. */
  pausedPath(id: string): string {
    return join(this.opts.root, ".paused", `${id}.tar`);
  }

  snapshotPath(snapshotId: string): string {
    if (!/^[a-z0-9_]{1,64}$/.test(snapshotId)) throw new BackendError(400, "invalid snapshot id");
    return join(this.opts.root, ".snapshots", `${snapshotId}.tar`);
  }

  /** A snapshot of a sandbox paused to disk: a copy of its files, written whole or not at all; its size. */
  snapshotPaused(id: string, snapshotId: string): number {
    const dest = this.snapshotPath(snapshotId);
    mkdirSync(join(this.opts.root, ".snapshots"), { recursive: true, mode: 0o700 });
    copyFileSync(this.pausedPath(id), `${dest}.partial`);
    renameSync(`${dest}.partial`, dest);
    return Bun.file(dest).size;
  }

  deleteSnapshot(snapshotId: string): void {
    rmSync(this.snapshotPath(snapshotId), { force: true });
  }

  sweepSnapshots(keep: Set<string>): void {
    const dir = join(this.opts.root, ".snapshots");
    for (const file of existsSync(dir) ? readdirSync(dir) : []) {
      if (file.endsWith(".tar") && keep.has(file.slice(0, -4))) continue;
      this.opts.log.warn("removing leftover snapshot file", { file });
      rmSync(join(dir, file), { force: true });
    }
  }

  /** Files of paused sandboxes that are no longer live (a crash between a kill's commit and its destroy). */
  sweepPaused(liveIds: Set<string>): void {
    const pausedDir = join(this.opts.root, ".paused");
    for (const file of existsSync(pausedDir) ? readdirSync(pausedDir) : []) {
      if (liveIds.has(file.replace(/\.tar(\.partial)?$/, "")) && !file.endsWith(".partial")) continue;
      rmSync(join(pausedDir, file), { force: true });
    }
  }
}
