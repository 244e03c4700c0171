import { BackendError } from "../../../src/plugin-api";

const RUN_TIMEOUT_MS = 15_000;

/**
 * Runs a host tool (nft, ip, pasta, umount) to completion; a failure is a 500 naming the
 * tool and what it printed. Bounded: killed after 15 s, output kept to 4 KiB.
 */
export async function run(argv: string[], stdin: string | undefined, what: string): Promise<string> {
  const proc = Bun.spawn(argv, { stdin: stdin === undefined ? "ignore" : new TextEncoder().encode(stdin), stdout: "pipe", stderr: "pipe", env: {} });
  const timer = setTimeout(() => proc.kill("SIGKILL"), RUN_TIMEOUT_MS);
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  if (code !== 0) throw new BackendError(500, `sandbox network: ${what} failed (exit ${code})${err.trim() ? `: ${err.trim().slice(0, 4096)}` : ""}`);
  return out.slice(0, 4096);
}
