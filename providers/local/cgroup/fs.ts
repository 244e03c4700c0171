import { readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";

/** Small file helpers for cgroupfs, where every file is one short value. */

export function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

export function write(path: string, value: string): void {
  writeFileSync(path, value);
}

/** Writes when the file exists (a controller or feature the kernel may lack). */
export function writeIfPresent(path: string, value: string): boolean {
  try {
    writeFileSync(path, value);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw e;
  }
}

/** `key value` lines (memory.events, cpu.stat, memory.oom_control) as numbers. */
export function keyedNumbers(text: string | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of (text ?? "").split("\n")) {
    const [k, v] = line.trim().split(/\s+/);
    if (k && v !== undefined && Number.isFinite(Number(v))) out.set(k, Number(v));
  }
  return out;
}

export function pidsIn(procsFile: string): number[] {
  return (readText(procsFile) ?? "")
    .split("\n")
    .filter(Boolean)
    .map(Number);
}

export function subdirs(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return [];
  }
}

/** Removes an empty group; true when it is gone. The kernel refuses while processes remain. */
export function removeGroup(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT";
  }
}

/**
 * How long a freeze may take before it counts as failed. The kernel freezes a task when it
 * next leaves the kernel; on a loaded host that can take seconds.
 */
export const FREEZE_TIMEOUT_MS = 10_000;

/** Waits until `frozen()` holds, polling quickly at first; false after `timeoutMs`. */
export async function waitFrozen(frozen: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (let i = 0; !frozen(); i++) {
    if (performance.now() > deadline) return false;
    await Bun.sleep(i < 20 ? 1 : 5);
  }
  return true;
}
