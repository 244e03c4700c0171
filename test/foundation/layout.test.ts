// Database-independent: the source tree's layout; the PostgreSQL pass of npm test leaves it out.
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { parseCircular, parseDependencyTree } from "dpdm";
import { Glob } from "bun";

const ROOT = join(import.meta.dir, "../..");

/**
 * Import circles among the given files, type-only imports and re-exports included (a
 * type circle is still two modules that cannot be understood, moved or tested apart).
 * Each circle as the files in it, relative to `root`.
 */
async function importCircles(root: string, globs: string[]): Promise<string[][]> {
  const tree = await parseDependencyTree(globs, {
    context: root,
    cwd: root,
    tsconfig: join(root, "tsconfig.json"),
    transform: false, // keep `import type`, which the TypeScript transform would drop
    skipDynamicImports: false,
    exclude: /node_modules/,
  });
  return parseCircular(tree).map((files) => files.map((f) => relative(root, join(root, f))));
}

test("no import circle between modules of src/ and providers/, type-only imports included", async () => {
  const circles = await importCircles(ROOT, ["src/**/*.ts", "providers/**/*.ts"]);
  // Break a circle by moving what both sides need (a type, a constant) to a module of its own.
  expect(circles.map((c) => c.join(" -> "))).toEqual([]);
}, 120_000);

test("the circle check sees a circle made only of type imports and re-exports", async () => {
  const dir = mkdtempSync(join(tmpdir(), "gw-circles-"));
  try {
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: { module: "ESNext", moduleResolution: "bundler" } }));
    writeFileSync(join(dir, "a.ts"), 'import type { B } from "./b";\nexport interface A { b?: B }\n');
    writeFileSync(join(dir, "b.ts"), 'export type { C as B } from "./c";\n');
    writeFileSync(join(dir, "c.ts"), 'import type { A } from "./a";\nexport interface C { a?: A }\n');
    writeFileSync(join(dir, "d.ts"), 'import type { A } from "./a";\nexport type D = A;\n');
    const circles = await importCircles(dir, ["*.ts"]);
    expect(circles.map((c) => [...c].sort())).toEqual([["a.ts", "b.ts", "c.ts"]]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("no source file over 500 lines in src/ or providers/", () => {
  const long: string[] = [];
  for (const pattern of ["src/**/*.ts", "providers/**/*.ts"]) {
    for (const file of new Glob(pattern).scanSync(ROOT)) {
      // Generated (drizzle-kit and scripts/embed-migrations.ts; protoc-gen-es through scripts/generate-envd.ts), not written by hand.
      if (file.startsWith("src/db/migrations/") || file.startsWith("src/e2b/gen/")) continue;
      const lines = readFileSync(join(ROOT, file), "utf8").split("\n").length;
      if (lines > 500) long.push(`${file}: ${lines} lines`);
    }
  }
  expect(long).toEqual([]);
});

test("every domain's route module comes from its index.ts", () => {
  const app = readFileSync(join(ROOT, "src/app.ts"), "utf8");
  const modules = [...app.matchAll(/^import \{ (\w+Module(?:, \w+Module)*) \} from "\.\/([^"]+)";$/gm)].flatMap((m) => m[1].split(", ").map((name) => ({ name, from: m[2] })));
  expect(modules.length).toBeGreaterThanOrEqual(10);
  for (const { name, from } of modules) {
    expect(`${name} from ./${from}`).toMatch(/ from \.\/[a-z0-9-]+$/);
    expect(readFileSync(join(ROOT, "src", from, "index.ts"), "utf8")).toMatch(new RegExp(`export (const |\\{[^}]*\\b)${name}\\b`));
  }
  // No module imported another way: every entry of routeModules is one of those imports.
  const listed = app.slice(app.indexOf("export const routeModules")).split("];")[0];
  const entries = [...listed.matchAll(/^  (\w+),$/gm)].map((m) => m[1]);
  expect(entries.sort()).toEqual(modules.map((m) => m.name).sort());
});
