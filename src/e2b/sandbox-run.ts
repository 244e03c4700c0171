import type { SandboxUser } from "../plugin-api";
import type { SandboxService } from "../sandboxes/service";

export interface Ran {
  stdout: Uint8Array;
  stderr: string;
  exitCode: number;
}

const DEADLINE_MS = 30_000;
const MAX_OUTPUT = 16 * 1024 * 1024;

/**
 * Runs a short helper inside the sandbox, as its user (or its root: image templates), and collects its output (file
 * operations of the E2B data plane). Threat: a helper held up by the sandbox's own
 * processes (a FIFO, a huge directory) would tie up the request; it is killed at the
 * deadline, and output past the cap is not kept.
 */
export async function runInSandbox(sandboxes: SandboxService, organizationId: string, sandboxId: string, argv: string[], stdin?: Uint8Array, user: SandboxUser = "user"): Promise<Ran> {
  const p = await sandboxes.spawn(organizationId, sandboxId, { argv, env: {}, ...(user === "root" ? { user } : {}) });
  if (stdin) p.write(stdin);
  p.closeStdin();
  const timer = setTimeout(() => p.kill("SIGKILL"), DEADLINE_MS);
  try {
    const [out, err, exitCode] = await Promise.all([collect(p.stdout), collect(p.stderr), p.exited]);
    return { stdout: out, stderr: new TextDecoder().decode(err), exitCode };
  } finally {
    clearTimeout(timer);
  }
}

async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const c of stream) {
    if (size + c.length > MAX_OUTPUT) break;
    chunks.push(c);
    size += c.length;
  }
  return Buffer.concat(chunks);
}
