import { crc32, deflateRawSync, inflateRawSync } from "node:zlib";

/**
 * Just enough of the ZIP format for skill bundles: reading an uploaded archive under
 * hard limits, and writing a version's files for download. No dependency: the format
 * subset is small, and the reader's refusals are the security boundary, so they are
 * spelled out here rather than left to a library's defaults.
 */

/** An archive we refuse; the message is for the client (400). */
export class ZipError extends Error {}

export interface ZipEntry {
  /** The name as stored (not yet checked as a path: the caller does that). */
  name: string;
  data: Uint8Array;
  /** The entry's Unix mode had an execute bit. */
  executable: boolean;
}

export interface ZipLimits {
  /** Largest sum of the entries' uncompressed sizes. */
  maxTotalBytes: number;
  /** Most file entries (directory entries are not counted but are bounded too). */
  maxFiles: number;
}

const EOCD = 0x06054b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;
const UNIX = 3;

/** True when the bytes start like a ZIP archive (local file header or an empty archive). */
export function looksLikeZip(data: Uint8Array): boolean {
  if (data.length < 4) return false;
  const sig = new DataView(data.buffer, data.byteOffset, 4).getUint32(0, true);
  return sig === LOCAL || sig === EOCD;
}

/**
 * Reads every file of an archive. Threats and what stops them:
 * - zip bombs (tiny archive, huge output): each entry is inflated with an output cap of
 *   what is left of `maxTotalBytes`, so no more than the limit is ever allocated, and the
 *   declared sizes are checked against it before inflating;
 * - entry floods: at most `maxFiles` files (and twice that many entries in all);
 * - symlinks and device files, which could point outside the skill's directory once
 *   extracted: refused (only regular files and directories are accepted);
 * - encrypted, multi-disk, ZIP64 and unknown-compression archives: refused rather than
 *   half-understood;
 * - corrupted or lying entries: the CRC-32 and the declared size must match the data.
 * Names are returned as stored; the caller applies its path rules (no absolute paths, no
 * `..`) to them like to any other uploaded name.
 */
export function readZip(data: Uint8Array, limits: ZipLimits): ZipEntry[] {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const eocd = findEocd(view);
  if (eocd < 0) throw new ZipError("not a valid zip archive (no end of central directory)");
  const disk = view.getUint16(eocd + 4, true);
  const cdDisk = view.getUint16(eocd + 6, true);
  const count = view.getUint16(eocd + 10, true);
  const cdSize = view.getUint32(eocd + 12, true);
  const cdOffset = view.getUint32(eocd + 16, true);
  if (disk !== 0 || cdDisk !== 0) throw new ZipError("multi-disk zip archives are not supported");
  if (count === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) throw new ZipError("ZIP64 archives are not supported");
  if (count > limits.maxFiles * 2) throw new ZipError(`the zip archive has ${count} entries; at most ${limits.maxFiles} files are allowed`);
  if (cdOffset + cdSize > eocd) throw new ZipError("not a valid zip archive (central directory out of bounds)");

  const out: ZipEntry[] = [];
  let total = 0;
  let p = cdOffset;
  for (let i = 0; i < count; i++) {
    if (p + 46 > eocd || view.getUint32(p, true) !== CENTRAL) throw new ZipError("not a valid zip archive (bad central directory entry)");
    const madeBy = view.getUint16(p + 4, true) >> 8;
    const flags = view.getUint16(p + 8, true);
    const method = view.getUint16(p + 10, true);
    const crc = view.getUint32(p + 16, true);
    const compressed = view.getUint32(p + 20, true);
    const size = view.getUint32(p + 24, true);
    const nameLen = view.getUint16(p + 28, true);
    const extraLen = view.getUint16(p + 30, true);
    const commentLen = view.getUint16(p + 32, true);
    const external = view.getUint32(p + 38, true);
    const localOffset = view.getUint32(p + 42, true);
    if (p + 46 + nameLen > eocd) throw new ZipError("not a valid zip archive (entry name out of bounds)");
    const name = new TextDecoder().decode(data.subarray(p + 46, p + 46 + nameLen));
    p += 46 + nameLen + extraLen + commentLen;

    const mode = madeBy === UNIX ? external >>> 16 : 0;
    const kind = mode & S_IFMT;
    if (kind === S_IFLNK) throw new ZipError(`zip entry '${name}' is a symbolic link; only regular files are allowed`);
    if (name.endsWith("/") || kind === S_IFDIR) continue;
    if (kind !== 0 && kind !== S_IFREG) throw new ZipError(`zip entry '${name}' is not a regular file`);
    if (flags & 1) throw new ZipError(`zip entry '${name}' is encrypted`);
    if (method !== 0 && method !== 8) throw new ZipError(`zip entry '${name}' uses an unsupported compression method (${method})`);
    if (out.length >= limits.maxFiles) throw new ZipError(`the bundle has more than ${limits.maxFiles} files`);
    const left = limits.maxTotalBytes - total;
    if (size > left) throw new ZipError(`the bundle is larger than ${limits.maxTotalBytes} bytes uncompressed`);

    if (localOffset + 30 > data.length || view.getUint32(localOffset, true) !== LOCAL) throw new ZipError(`zip entry '${name}': bad local header`);
    const start = localOffset + 30 + view.getUint16(localOffset + 26, true) + view.getUint16(localOffset + 28, true);
    if (start + compressed > data.length) throw new ZipError(`zip entry '${name}': data out of bounds`);
    const raw = data.subarray(start, start + compressed);
    let content: Uint8Array;
    if (method === 0) content = raw;
    else {
      try {
        // The cap is what is left of the budget, whatever the entry declares: a lying
        // header cannot make us allocate more than the limit.
        content = inflateRawSync(raw, { maxOutputLength: Math.max(1, left) });
      } catch (e) {
        if ((e as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") throw new ZipError(`the bundle is larger than ${limits.maxTotalBytes} bytes uncompressed`);
        throw new ZipError(`zip entry '${name}' is corrupt`);
      }
    }
    if (content.length !== size || crc32(content) !== crc) throw new ZipError(`zip entry '${name}' is corrupt (size or checksum mismatch)`);
    total += content.length;
    out.push({ name, data: new Uint8Array(content), executable: (mode & 0o111) !== 0 });
  }
  return out;
}

function findEocd(view: DataView): number {
  // The record is 22 bytes plus a comment of at most 65535 bytes, at the very end.
  const min = Math.max(0, view.byteLength - 22 - 0xffff);
  for (let i = view.byteLength - 22; i >= min; i--) if (view.getUint32(i, true) === EOCD) return i;
  return -1;
}

/** DOS date and time fields (local time, 2-second resolution), as ZIP stores them. */
function dosDateTime(d: Date): { time: number; date: number } {
  const year = Math.max(1980, d.getFullYear());
  return {
    time: (d.getHours() << 11) | (d.getMinutes() << 5) | Math.floor(d.getSeconds() / 2),
    date: ((year - 1980) << 9) | ((d.getMonth() + 1) << 5) | d.getDate(),
  };
}

/** Writes a ZIP archive (deflated entries, UTF-8 names, Unix modes). Sizes stay far below the ZIP64 thresholds by the bundle limits. */
export function writeZip(files: { name: string; data: Uint8Array; executable: boolean }[], modified: Date): Uint8Array {
  const { time, date } = dosDateTime(modified);
  const locals: Uint8Array[] = [];
  const centrals: Uint8Array[] = [];
  let offset = 0;
  for (const f of files) {
    const name = new TextEncoder().encode(f.name);
    const deflated = deflateRawSync(f.data);
    const stored = deflated.length >= f.data.length;
    const body = stored ? f.data : deflated;
    const crc = crc32(f.data);
    const local = new Uint8Array(30 + name.length);
    const lv = new DataView(local.buffer);
    lv.setUint32(0, LOCAL, true);
    lv.setUint16(4, 20, true);
    lv.setUint16(6, 0x0800, true); // bit 11: names are UTF-8
    lv.setUint16(8, stored ? 0 : 8, true);
    lv.setUint16(10, time, true);
    lv.setUint16(12, date, true);
    lv.setUint32(14, crc, true);
    lv.setUint32(18, body.length, true);
    lv.setUint32(22, f.data.length, true);
    lv.setUint16(26, name.length, true);
    local.set(name, 30);
    const central = new Uint8Array(46 + name.length);
    const cv = new DataView(central.buffer);
    cv.setUint32(0, CENTRAL, true);
    cv.setUint16(4, (UNIX << 8) | 20, true);
    cv.setUint16(6, 20, true);
    cv.setUint16(8, 0x0800, true);
    cv.setUint16(10, stored ? 0 : 8, true);
    cv.setUint16(12, time, true);
    cv.setUint16(14, date, true);
    cv.setUint32(16, crc, true);
    cv.setUint32(20, body.length, true);
    cv.setUint32(24, f.data.length, true);
    cv.setUint16(28, name.length, true);
    cv.setUint32(38, ((S_IFREG | (f.executable ? 0o755 : 0o644)) << 16) >>> 0, true);
    cv.setUint32(42, offset, true);
    central.set(name, 46);
    locals.push(local, body);
    centrals.push(central);
    offset += local.length + body.length;
  }
  const cdSize = centrals.reduce((n, c) => n + c.length, 0);
  const end = new Uint8Array(22);
  const ev = new DataView(end.buffer);
  ev.setUint32(0, EOCD, true);
  ev.setUint16(8, files.length, true);
  ev.setUint16(10, files.length, true);
  ev.setUint32(12, cdSize, true);
  ev.setUint32(16, offset, true);
  return Buffer.concat([...locals, ...centrals, end]);
}
