import { toFile } from "@anthropic-ai/sdk";

/**
 * Zip archives are made and read by Python's zipfile: an implementation no one here
 * wrote, so the service's reader and writer are checked against it, not against
 * themselves.
 */
function python(script: string, input: string): Uint8Array {
  const py = Bun.which("python3");
  if (!py) throw new Error("python3 not found: install the Debian package 'python3' to run the skill archive tests");
  const r = Bun.spawnSync([py, "-c", script], { stdin: new TextEncoder().encode(input), stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`python3 failed: ${r.stderr.toString()}`);
  return new Uint8Array(r.stdout);
}

export interface ZipSpec {
  name: string;
  text?: string;
  /** That many zero bytes (compressible: a zip bomb). */
  zeros?: number;
  /** Unix mode with type bits (0o120777 = symlink); default regular 0o644. */
  mode?: number;
  dir?: boolean;
}

export function pythonZip(entries: ZipSpec[]): Uint8Array {
  return python(
    `
import io, json, sys, zipfile
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
    for e in json.load(sys.stdin):
        info = zipfile.ZipInfo(e["name"])
        info.compress_type = zipfile.ZIP_DEFLATED
        mode = e.get("mode")
        if e.get("dir"):
            mode = 0o40755
        info.external_attr = ((mode if mode is not None and mode > 0o7777 else 0o100000 | (mode or 0o644)) << 16)
        info.create_system = 3
        data = b"\\0" * e["zeros"] if "zeros" in e else e.get("text", "").encode()
        z.writestr(info, data)
sys.stdout.buffer.write(buf.getvalue())
`,
    JSON.stringify(entries),
  );
}

/** Entries of an archive as Python reads them: name, Unix mode, text. */
export function pythonUnzip(zip: Uint8Array): { name: string; mode: number; text: string }[] {
  const out = python(
    `
import base64, io, json, sys, zipfile
z = zipfile.ZipFile(io.BytesIO(base64.b64decode(sys.stdin.read())))
bad = z.testzip()
if bad: raise SystemExit("corrupt entry " + bad)
print(json.dumps([{"name": i.filename, "mode": i.external_attr >> 16, "text": z.read(i).decode()} for i in z.infolist()]))
`,
    Buffer.from(zip).toString("base64"),
  );
  return JSON.parse(new TextDecoder().decode(out));
}

export const skillMd = (name: string, description: string, body = "") => `---\nname: ${name}\ndescription: ${description}\n---\n${body}`;

/** SDK upload parts: `{path: content}`. */
export function files(tree: Record<string, string | Uint8Array>) {
  return Promise.all(Object.entries(tree).map(([path, content]) => toFile(typeof content === "string" ? Buffer.from(content) : content, path)));
}
