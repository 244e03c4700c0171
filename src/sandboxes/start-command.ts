/**
 * A template's start and ready commands (E2B's setStartCmd / setReadyCmd, a Dockerfile's
 * CMD / ENTRYPOINT): when a sandbox of the template is created, the start command runs in
 * the background as the template's user, and the ready command is run again and again
 * until it succeeds; only then does the create return. A start command that exits early,
 * or a ready command that never succeeds within READY_TIMEOUT_MS, fails the create with the
 * start command's last output, and the sandbox is destroyed.
 */
import { BackendError, type BackendState, type CreateSpec, type SandboxBackend, type SandboxTemplate, type SpawnSpec } from "./backend";

export const READY_TIMEOUT_MS = 120_000;
const POLL_MS = 200;
const KEEP_BYTES = 4096;

export interface StartCommands {
  startCmd?: string;
  readyCmd?: string;
}

export function startCommandsOf(template: SandboxTemplate): StartCommands | undefined {
  const t = template as SandboxTemplate & StartCommands;
  return t.startCmd || t.readyCmd ? { startCmd: t.startCmd || undefined, readyCmd: t.readyCmd || undefined } : undefined;
}

/** Runs the start command and waits for the ready command; throws a BackendError (502) saying why the sandbox is not ready. */
export async function startAndWaitReady(backend: SandboxBackend, id: string, state: BackendState, cmds: StartCommands, env: Record<string, string>): Promise<void> {
  if (!backend.spawn) throw new BackendError(501, "this template has a start or ready command, and its sandbox backend cannot run background processes");
  let output = "";
  let exited: number | undefined;
  if (cmds.startCmd) {
    // The template's user and workdir: the backend's defaults for a sandbox of this template.
    const p = backend.spawn(id, state, { argv: ["/bin/sh", "-c", cmds.startCmd], env } as SpawnSpec);
    p.closeStdin();
    // Drained for as long as it runs (a full pipe would stop it); only the last bytes are kept, for the error below.
    const keep = async (s: ReadableStream<Uint8Array>) => {
      const dec = new TextDecoder();
      for await (const chunk of s) output = (output + dec.decode(chunk, { stream: true })).slice(-KEEP_BYTES);
    };
    void keep(p.stdout).catch(() => {});
    void keep(p.stderr).catch(() => {});
    void p.exited.then((code) => (exited = code));
  }
  if (!cmds.readyCmd) return;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const r = await backend.exec!(id, state, { cmd: "/bin/sh", args: ["-c", cmds.readyCmd], envVars: env, timeoutMs: Math.max(1000, deadline - Date.now()) });
    if (r.exitCode === 0) return;
    if (exited !== undefined && exited !== 0) throw new BackendError(502, `the template's start command exited with code ${exited} before its ready command succeeded; its output ends:\n${output}`);
    if (Date.now() >= deadline) throw new BackendError(502, `the template's ready command did not succeed within ${READY_TIMEOUT_MS / 1000}s; the start command's output ends:\n${output}`);
    await Bun.sleep(POLL_MS);
  }
}

/** Creates a sandbox and, when its template has them, runs its start command and waits for its ready command; a sandbox that does not get ready is destroyed. */
export async function createStarted(backend: SandboxBackend, spec: CreateSpec): Promise<BackendState> {
  const state = await backend.create(spec);
  const cmds = startCommandsOf(spec.template);
  if (cmds) {
    await startAndWaitReady(backend, spec.sandboxId, state, cmds, spec.envVars).catch(async (e) => {
      await backend.destroy(spec.sandboxId, state).catch(() => {});
      throw e;
    });
  }
  return state;
}
