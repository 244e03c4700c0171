// Regenerates src/e2b/gen/ (protobuf-es types and service descriptors) from our envd
// .proto files in proto/envd/, with buf and protoc-gen-es from node_modules. The
// generated files are committed; run this after changing a .proto file.
import { rmSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const bin = join(root, "node_modules", ".bin");
rmSync(join(root, "src/e2b/gen"), { recursive: true, force: true });
const proc = Bun.spawnSync([join(bin, "buf"), "generate"], {
  cwd: join(root, "proto/envd"),
  env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ""}` },
  stdout: "inherit",
  stderr: "inherit",
});
if (proc.exitCode !== 0) process.exit(proc.exitCode ?? 1);
