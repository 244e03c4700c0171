import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Sends one HTTP request from a separate process and resolves with its status and body.
 * For measuring how responsive a service in this process stays while a large request is
 * in flight: sent from here, writing the body would itself hold this process's event
 * loop, and the measurement would see the client instead of the service.
 */
export async function requestFromChild(url: string, init: { method: string; headers: Record<string, string>; body?: string | Uint8Array }): Promise<{ status: number; text: string }> {
  const dir = mkdtempSync(join(tmpdir(), "child-request-"));
  try {
    const bodyFile = join(dir, "body");
    if (init.body !== undefined) writeFileSync(bodyFile, init.body);
    const script = join(dir, "send.ts");
    writeFileSync(
      script,
      `const [url, method, headers, bodyFile] = process.argv.slice(2);
const body = bodyFile ? new Uint8Array(await Bun.file(bodyFile).arrayBuffer()) : undefined;
const res = await fetch(url, { method, headers: JSON.parse(headers), body });
process.stdout.write(JSON.stringify({ status: res.status, text: await res.text() }));`,
    );
    const proc = Bun.spawn([process.execPath, script, url, init.method, JSON.stringify(init.headers), init.body === undefined ? "" : bodyFile], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`the request process failed (${code}): ${err}`);
    return JSON.parse(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A /healthz answer slower than this in the best of several tries is a stalled process
 * (a request that holds the event loop: a quadratic parse, a synchronous walk of a huge
 * body), not a busy machine. A liveness bound five times the 200 ms such a stall was first
 * caught at, so a loaded machine does not trip it; how fast the service answers under
 * hostile bodies is measured by `npm run bench -- limits`.
 */
export const STALL_MS = 1_000;

/**
 * Sends a request from a separate process (see requestFromChild) and, until it is
 * answered, asks the service's /healthz back to back: the request's answer and the
 * slowest /healthz answer while it was in flight. A /healthz other than 200 throws.
 */
export async function requestWithHealthProbe(
  serviceUrl: string,
  path: string,
  init: { method: string; headers: Record<string, string>; body?: string | Uint8Array },
): Promise<{ status: number; text: string; slowestHealthMs: number }> {
  let answered = false;
  const pending = requestFromChild(serviceUrl + path, init).finally(() => {
    answered = true;
  });
  let slowest = 0;
  do {
    const started = performance.now();
    const health = await fetch(`${serviceUrl}/healthz`);
    await health.arrayBuffer();
    if (health.status !== 200) throw new Error(`/healthz answered ${health.status}`);
    slowest = Math.max(slowest, performance.now() - started);
    await Bun.sleep(5);
  } while (!answered);
  return { ...(await pending), slowestHealthMs: slowest };
}
