// `npm run build`: one self-contained executable, dist/gateway. PGlite's wasm/data files
// and the SQL migrations are embedded (see src/db/pglite-assets.ts, src/db/migrations); the
// embedded database's thread (src/db/pglite-worker.ts) is a second entry point, as Bun
// requires for workers in a compiled program.
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const outfile = join(root, "dist", "gateway");
mkdirSync(join(root, "dist"), { recursive: true });
const started = performance.now();
const proc = Bun.spawnSync([process.execPath, "build", "--compile", "--minify-syntax", join(root, "src/main.ts"), join(root, "src/db/pglite-worker.ts"), "--outfile", outfile], {
  cwd: root,
  stdout: "inherit",
  stderr: "inherit",
});
if (proc.exitCode !== 0) {
  console.error("build failed");
  process.exit(proc.exitCode ?? 1);
}
console.log(`built ${outfile} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
