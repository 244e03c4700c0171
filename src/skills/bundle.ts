import { ApiError } from "../http/errors";
import { FrontMatterError, parseFrontMatter } from "./frontmatter";
import { looksLikeZip, readZip, ZipError } from "./zip";

/**
 * Turning an upload into a skill bundle: checked paths, limits, and the SKILL.md front
 * matter. Everything here runs before anything is stored, and every refusal is a 400
 * that says what to fix.
 */

/** Sum of the bundle's file sizes (uncompressed). Below the 10 MB request limit, so multipart overhead fits. */
export const MAX_BUNDLE_BYTES = 8 * 1024 * 1024;
export const MAX_FILES = 500;
const MAX_PATH_CHARS = 512;
const MAX_SEGMENT_BYTES = 255;
const MAX_DEPTH = 16;
export const MAX_NAME_CHARS = 64;
export const MAX_DESCRIPTION_CHARS = 1024;
export const MAX_DISPLAY_NAME_CHARS = 255;
const NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const SKILL_FILE = "SKILL.md";

export interface BundleFile {
  /** Relative to the skill's directory, `/`-separated, checked by `checkPath`. */
  path: string;
  data: Uint8Array;
  executable: boolean;
}

export interface Bundle {
  name: string;
  description: string;
  files: BundleFile[];
  totalBytes: number;
}

/** One uploaded part: its file name (a relative path) and bytes. */
export interface Upload {
  name: string;
  data: Uint8Array;
  executable?: boolean;
}

const bad = (message: string) => new ApiError(400, message);

/**
 * A relative path that stays inside the skill's directory wherever it is extracted.
 * Threat: path traversal (zip slip). An uploaded name is written into a sandbox and into
 * the downloaded archive, where `../`, absolute paths or drive letters would escape the
 * skill's directory on whatever machine unpacks it. Backslashes are read as separators
 * (Windows clients), so `..\\x` is caught as well; control characters (NUL, newlines)
 * are refused since shells and tools mis-handle them.
 */
export function checkPath(raw: string): string {
  const shown = JSON.stringify(raw.slice(0, 200));
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(raw)) throw bad(`file path ${shown} contains control characters`);
  let p = raw.replace(/\\/g, "/");
  if (p.startsWith("/") || /^[A-Za-z]:/.test(p)) throw bad(`file path ${shown} is absolute; paths must be relative to the skill's directory`);
  while (p.startsWith("./")) p = p.slice(2);
  if (!p) throw bad("a file has an empty path");
  if (p.length > MAX_PATH_CHARS) throw bad(`file path ${shown} is longer than ${MAX_PATH_CHARS} characters`);
  const segments = p.split("/");
  if (segments.length > MAX_DEPTH) throw bad(`file path ${shown} is nested deeper than ${MAX_DEPTH} levels`);
  for (const s of segments) {
    if (s === "..") throw bad(`file path ${shown} contains '..'; paths must stay inside the skill's directory`);
    if (s === "" || s === ".") throw bad(`file path ${shown} has an empty or '.' segment`);
    if (new TextEncoder().encode(s).length > MAX_SEGMENT_BYTES) throw bad(`file path ${shown} has a name longer than ${MAX_SEGMENT_BYTES} bytes`);
  }
  return segments.join("/");
}

/** Uploaded parts -> a checked bundle. A single `.zip` part (or one that is a zip archive) is unpacked first. */
export function bundleFromUploads(uploads: Upload[]): Bundle {
  if (!uploads.length) throw bad("no files uploaded: send the bundle as multipart/form-data 'files[]' parts (one per file, named by its relative path), or one zip archive");
  let parts = uploads;
  if (uploads.length === 1 && (uploads[0].name.toLowerCase().endsWith(".zip") || looksLikeZip(uploads[0].data))) {
    try {
      parts = readZip(uploads[0].data, { maxTotalBytes: MAX_BUNDLE_BYTES, maxFiles: MAX_FILES }).map((e) => ({ name: e.name, data: e.data, executable: e.executable }));
    } catch (e) {
      if (e instanceof ZipError) throw bad(e.message);
      throw e;
    }
  }
  if (parts.length > MAX_FILES) throw bad(`the bundle has ${parts.length} files; at most ${MAX_FILES} are allowed`);
  let total = 0;
  for (const p of parts) total += p.data.length;
  if (total > MAX_BUNDLE_BYTES) throw bad(`the bundle is ${total} bytes; at most ${MAX_BUNDLE_BYTES} bytes (uncompressed) are allowed`);

  const checked = parts.map((p) => ({ path: checkPath(p.name), data: p.data, executable: p.executable ?? false }));
  const { files, directory } = rootAtSkillFile(checked);
  const seen = new Set<string>();
  for (const f of files) {
    if (seen.has(f.path)) throw bad(`file '${f.path}' is uploaded twice`);
    seen.add(f.path);
    // Scripts without a zip mode still run as `./script` when they say how (#!).
    if (f.data[0] === 0x23 && f.data[1] === 0x21) f.executable = true;
  }
  const skillMd = files.find((f) => f.path === SKILL_FILE)!;
  const { name, description } = skillMetadata(skillMd.data, directory);
  return { name, description, files, totalBytes: total };
}

/**
 * Where the skill's root is (the SDK's rule): either SKILL.md is at the root of the
 * upload, or every file is in one top-level directory with SKILL.md at its root; that
 * directory is then stripped (and is the fallback name).
 */
function rootAtSkillFile(files: BundleFile[]): { files: BundleFile[]; directory?: string } {
  if (files.some((f) => f.path === SKILL_FILE)) return { files };
  const tops = new Set(files.map((f) => (f.path.includes("/") ? f.path.slice(0, f.path.indexOf("/")) : "")));
  if (tops.size === 1 && !tops.has("")) {
    const dir = [...tops][0];
    if (!files.some((f) => f.path === `${dir}/${SKILL_FILE}`)) throw bad(`the bundle has no ${SKILL_FILE} at the root of its top-level directory '${dir}/'`);
    return { files: files.map((f) => ({ ...f, path: f.path.slice(dir.length + 1) })), directory: dir };
  }
  throw bad(`the bundle has no ${SKILL_FILE}: put every file in one top-level directory with ${SKILL_FILE} at its root (or ${SKILL_FILE} at the root of the upload)`);
}

/** `name` and `description` from the SKILL.md front matter (`name` falls back to the bundle's directory). */
function skillMetadata(data: Uint8Array, directory: string | undefined): { name: string; description: string } {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(data);
  } catch {
    throw bad(`${SKILL_FILE} is not valid UTF-8 text`);
  }
  let fm;
  try {
    fm = parseFrontMatter(text);
  } catch (e) {
    if (e instanceof FrontMatterError) throw bad(e.message);
    throw e;
  }
  if (fm.structured.has("name") || fm.structured.has("description")) throw bad(`${SKILL_FILE} front matter: 'name' and 'description' must be strings`);
  const name = fm.values.get("name") || directory;
  if (!name) throw bad(`${SKILL_FILE} front matter has no 'name:' (and the bundle has no top-level directory to take it from)`);
  checkSkillName(name);
  const description = (fm.values.get("description") ?? "").trim();
  if (!description) throw bad(`${SKILL_FILE} front matter needs a non-empty 'description:' (what the skill does and when to use it)`);
  if (description.length > MAX_DESCRIPTION_CHARS) throw bad(`${SKILL_FILE} description is longer than ${MAX_DESCRIPTION_CHARS} characters`);
  return { name, description };
}

/** The skill's slug names its directory in sandboxes and archives: kebab-case only. */
export function checkSkillName(name: string): void {
  if (name.length > MAX_NAME_CHARS || !NAME.test(name)) {
    throw bad(`skill name ${JSON.stringify(name.slice(0, 100))} must be kebab-case (lowercase letters, digits and single hyphens), at most ${MAX_NAME_CHARS} characters`);
  }
}

export function checkDisplayName(v: string): string {
  const s = v.trim();
  if (!s) throw bad("display_name must not be empty");
  if (s.length > MAX_DISPLAY_NAME_CHARS) throw bad(`display_name is longer than ${MAX_DISPLAY_NAME_CHARS} characters`);
  if (/[\r\n]/.test(s)) throw bad("display_name must be a single line");
  return s;
}

/**
 * The multipart form of a create request: `files[]` (or `files`) file parts and an
 * optional `display_name`. Anything else is refused, so typos do not pass silently.
 */
export async function uploadsFromForm(body: unknown): Promise<{ uploads: Upload[]; displayName?: string }> {
  if (!(body instanceof FormData)) throw bad("upload the bundle as multipart/form-data: 'files[]' parts named by their relative paths (e.g. my-skill/SKILL.md), or one zip archive");
  const uploads: Upload[] = [];
  let displayName: string | undefined;
  for (const [key, entry] of body.entries()) {
    const value = entry as unknown as string | File;
    if (key === "files[]" || key === "files") {
      if (typeof value === "string") throw bad(`'${key}' parts must be files (with a file name), not text fields`);
      if (uploads.length >= MAX_FILES) throw bad(`the bundle has more than ${MAX_FILES} files`);
      uploads.push({ name: value.name, data: new Uint8Array(await value.arrayBuffer()) });
    } else if (key === "display_name") {
      if (typeof value !== "string") throw bad("display_name must be a text field");
      if (displayName !== undefined) throw bad("display_name is given twice");
      displayName = checkDisplayName(value);
    } else throw bad(`unknown form field '${key}'; expected files[] and optionally display_name`);
  }
  return { uploads, displayName };
}
