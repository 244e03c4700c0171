import { mkdirSync, renameSync } from "node:fs";
import { dirname } from "node:path";
import { openDatabase } from "./client";

/*
 * Making the prepared empty database (prepared.ts says what it is and why); apart from
 * prepared.ts because it opens a database, and the database client loads prepared.ts.
 */

/** Writes the prepared database for this PGlite version to `path` (atomically: a half-written file is never loaded). */
export async function writePreparedDatabase(path: string): Promise<void> {
  const database = await openDatabase({ dataDir: "memory://", prepared: false });
  let tar: Blob;
  try {
    tar = await database.dump!();
  } finally {
    await database.close();
  }
  mkdirSync(dirname(path), { recursive: true });
  const partial = `${path}.${process.pid}.partial`;
  await Bun.write(partial, Bun.gzipSync(new Uint8Array(await tar.arrayBuffer()), { level: 9 }));
  renameSync(partial, path);
}
