// Makes the prepared empty embedded database (src/db/prepared.ts) for this install:
// `npm ci` runs it (package.json "prepare"), `npm run build` embeds its output. With a
// path argument it writes there; by default to node_modules/.cache, where `npm start`
// finds it. A failure here is not an install failure: the first start then runs initdb.
import { existsSync } from "node:fs";
import { DEV_PREPARED_PATH } from "../src/db/prepared";
import { writePreparedDatabase } from "../src/db/write-prepared";

const path = process.argv[2] ?? DEV_PREPARED_PATH;
if (existsSync(path) && !process.argv.includes("--force")) {
  console.log(`prepared database: ${path} (already there)`);
  process.exit(0);
}
const started = performance.now();
try {
  await writePreparedDatabase(path);
  console.log(`prepared database: ${path} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
} catch (e) {
  console.warn(`could not prepare the empty database (${(e as Error).message}); the first start will create it instead`);
  if (process.argv[2]) process.exit(1); // the build asked for it: fail the build
}
process.exit(0);
