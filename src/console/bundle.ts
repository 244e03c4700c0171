import { join } from "node:path";

/**
 * The console's browser code (ui/), bundled into one script by Bun's bundler. Imported as
 * a macro (routes.ts), so it runs when the service's source is transpiled: at
 * `npm run build` the bundle is inlined into the binary as a string, and from source
 * (`npm start`, tests) it is built when the service first loads. Nothing is fetched at
 * run time. (A macro may not call Bun.build in-process: the bundler would wait on itself,
 * hence the `bun build` child.)
 */
export function consoleBundle(): string {
  const entry = join(import.meta.dir, "ui", "main.ts");
  const proc = Bun.spawnSync([process.execPath, "build", entry, "--target=browser", "--format=esm", "--minify", "--define", 'process.env.NODE_ENV="production"'], {
    cwd: join(import.meta.dir, "..", ".."),
    env: { ...process.env, BUN_BE_BUN: "1" },
  });
  if (proc.exitCode !== 0) throw new Error(`console bundle failed: ${proc.stderr.toString()}`);
  return proc.stdout.toString();
}
