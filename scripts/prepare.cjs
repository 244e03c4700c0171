// npm's "prepare" step (runs after `npm ci` / `npm install` in this directory): makes the
// prepared empty database for `npm start` (scripts/prepare-database.ts). In plain Node so
// that it runs whatever the PATH holds, and it never fails the install: without the
// tarball the first start runs initdb instead.
const { spawnSync } = require("node:child_process");
const { existsSync } = require("node:fs");
const { join } = require("node:path");

const bun = join(__dirname, "..", "node_modules", ".bin", "bun");
const script = join(__dirname, "prepare-database.ts");
if (!existsSync(bun) || !existsSync(script)) {
  console.warn("prepare: skipped the prepared database (no bun in node_modules/.bin); the first start will create the database instead");
  process.exit(0);
}
const r = spawnSync(bun, [script], { stdio: "inherit" });
if (r.error || r.status !== 0) console.warn(`prepare: could not make the prepared database (${r.error?.message ?? `exit ${r.status}`}); the first start will create the database instead`);
