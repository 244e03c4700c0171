import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * A PEP 503 simple index with one pure-Python wheel, `gwtestpkg` 1.0.0 (`gwtestpkg.VALUE` is
 * "pip package from the test registry"), under `dir`: `/simple/` and `/files/`, for a test
 * host to serve (`pip install --index-url http://host/simple/ gwtestpkg`).
 */
export function makePypiIndex(dir: string): void {
  const py = join(dir, "build-py");
  mkdirSync(join(py, "gwtestpkg"), { recursive: true });
  mkdirSync(join(py, "gwtestpkg-1.0.0.dist-info"), { recursive: true });
  writeFileSync(join(py, "gwtestpkg", "__init__.py"), 'VALUE = "pip package from the test registry"\n');
  writeFileSync(join(py, "gwtestpkg-1.0.0.dist-info", "METADATA"), "Metadata-Version: 2.1\nName: gwtestpkg\nVersion: 1.0.0\n");
  writeFileSync(join(py, "gwtestpkg-1.0.0.dist-info", "WHEEL"), "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n");
  writeFileSync(join(py, "gwtestpkg-1.0.0.dist-info", "RECORD"), "gwtestpkg/__init__.py,,\ngwtestpkg-1.0.0.dist-info/METADATA,,\ngwtestpkg-1.0.0.dist-info/WHEEL,,\ngwtestpkg-1.0.0.dist-info/RECORD,,\n");
  mkdirSync(join(dir, "files"), { recursive: true });
  const wheel = join(dir, "files", "gwtestpkg-1.0.0-py3-none-any.whl");
  const zip = Bun.spawnSync(["python3", "-c", "import shutil,sys; shutil.make_archive(sys.argv[1], 'zip', sys.argv[2])", wheel, py], { stderr: "pipe" });
  if (zip.exitCode !== 0) throw new Error(`making the wheel: ${zip.stderr}`);
  renameSync(`${wheel}.zip`, wheel);
  const hash = createHash("sha256").update(readFileSync(wheel)).digest("hex");
  mkdirSync(join(dir, "simple", "gwtestpkg"), { recursive: true });
  writeFileSync(join(dir, "simple", "index.html"), '<html><body><a href="gwtestpkg/">gwtestpkg</a></body></html>\n');
  writeFileSync(join(dir, "simple", "gwtestpkg", "index.html"), `<html><body><a href="../../files/gwtestpkg-1.0.0-py3-none-any.whl#sha256=${hash}">gwtestpkg-1.0.0-py3-none-any.whl</a></body></html>\n`);
}
