// `npm run build`: one self-contained executable, dist/gateway. PGlite's wasm/data files
// and the SQL migrations are embedded (see src/db/pglite-assets.ts, src/db/migrations); the
// embedded database's thread (src/db/pglite-worker.ts) is a second entry point, as Bun
// requires for workers in a compiled program. The prepared empty database
// (src/db/prepared.ts) is made here when npm ci did not, and embedded as a third entry point, a file.
// The code is embedded compiled to JavaScriptCore's bytecode as well (--bytecode): a start then
// skips parsing some 20 MB of bundled source, twice for `serve` (src/allocator.ts replaces the
// process once), which was a third of a start's CPU time; the price is some 14 MB of binary.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { DEV_PREPARED_PATH } from "../src/db/prepared";

const root = join(import.meta.dir, "..");
const outfile = join(root, "dist", "gateway");
mkdirSync(join(root, "dist"), { recursive: true });
const started = performance.now();
// The same file `npm start` uses (made by npm ci's prepare step, or here when missing); dist/ holds only the binary.
const prepared = DEV_PREPARED_PATH;
const prepare = Bun.spawnSync([process.execPath, join(root, "scripts/prepare-database.ts"), prepared], { cwd: root, stdout: "inherit", stderr: "inherit" });
if (prepare.exitCode !== 0) {
  console.error("build failed: could not prepare the empty database");
  process.exit(prepare.exitCode ?? 1);
}
// [name].[ext] keeps the tarball's name (the binary finds it by name, src/db/prepared.ts).
const entries = [join(root, "src/main.ts"), join(root, "src/db/pglite-worker.ts"), prepared];
const proc = Bun.spawnSync([process.execPath, "build", "--compile", "--bytecode", "--minify-syntax", "--asset-naming=[name].[ext]", ...entries, "--outfile", outfile], {
  cwd: root,
  stdout: "inherit",
  stderr: "inherit",
});
if (proc.exitCode !== 0) {
  console.error("build failed");
  process.exit(proc.exitCode ?? 1);
}
console.log(`built ${outfile} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
