/**
 * A template's start and ready commands (E2B's setStartCmd / setReadyCmd, a Dockerfile's
 * CMD / ENTRYPOINT): when a sandbox of the template is created, the start command runs in
 * the background as the template's user, and the ready command is run again and again
 * until it succeeds; only then does the create return. A start command that exits early,
 * or a ready command that never succeeds within READY_TIMEOUT_MS, fails the create with the
 * start command's last output, and the sandbox is destroyed.
 */
import { BackendError, type BackendState, type CreateSpec, type ExecSpec, type SandboxBackend, type SandboxTemplate, type SpawnSpec } from "./backend";

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
export async function startAndWaitReady(backend: SandboxBackend, id: string, state: BackendState, cmds: StartCommands, env: Record<string, string>, runAs: RunAs = {}): Promise<void> {
  if (!backend.spawn) throw new BackendError(501, "this template has a start or ready command, and its sandbox backend cannot run background processes");
  const as = commandAs(runAs);
  let output = "";
  let exited: number | undefined;
  if (cmds.startCmd) {
    // The template's user and workdir: the backend's defaults for a sandbox of this template.
    const p = backend.spawn(id, state, { argv: as.argv(cmds.startCmd), env, ...(runAs.workdir ? { cwd: runAs.workdir } : {}), ...(as.user ? { user: as.user } : {}) } as SpawnSpec);
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
    const ready = runAs.workdir ? `cd ${shellWord(runAs.workdir)} 2>/dev/null; ${cmds.readyCmd}` : cmds.readyCmd;
    const [cmd, ...args] = as.argv(ready);
    const r = await backend.exec!(id, state, { cmd, args, envVars: env, timeoutMs: Math.max(1000, deadline - Date.now()), ...(as.user ? { user: as.user } : {}) } as ExecSpec);
    if (r.exitCode === 0) return;
    if (exited !== undefined && exited !== 0) throw new BackendError(502, `the template's start command exited with code ${exited} before its ready command succeeded; its output ends:\n${output}`);
    if (Date.now() >= deadline) throw new BackendError(502, `the template's ready command did not succeed within ${READY_TIMEOUT_MS / 1000}s; the start command's output ends:\n${output}`);
    await Bun.sleep(POLL_MS);
  }
}

/** The user and working directory an image template's steps left (its `imageConfig`), which its start and ready commands run with. */
export interface RunAs {
  user?: string;
  workdir?: string;
}

/**
 * How to run a command as `user`: the backend's own users (`user`, `root`) directly; any
 * other user the image has, through runuser as the sandbox's root (which only image
 * templates have; their user namespace maps it onto an unprivileged host id).
 */
function commandAs(runAs: RunAs): { user?: "root"; argv: (cmd: string) => string[] } {
  const u = runAs.user;
  if (!u || u === "user") return { argv: (cmd) => ["/bin/sh", "-c", cmd] };
  if (u === "root" || u === "0") return { user: "root", argv: (cmd) => ["/bin/sh", "-c", cmd] };
  return { user: "root", argv: (cmd) => ["runuser", "-u", u, "--", "/bin/sh", "-c", cmd] };
}

function shellWord(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** Creates a sandbox and, when its template has them, runs its start command and waits for its ready command; a sandbox that does not get ready is destroyed. */
export async function createStarted(backend: SandboxBackend, spec: CreateSpec): Promise<BackendState> {
  const state = await backend.create(spec);
  const cmds = startCommandsOf(spec.template);
  if (cmds) {
    const config = (spec.template as { imageConfig?: RunAs }).imageConfig;
    await startAndWaitReady(backend, spec.sandboxId, state, cmds, spec.envVars, { user: config?.user, workdir: config?.workdir }).catch(async (e) => {
      await backend.destroy(spec.sandboxId, state).catch(() => {});
      throw e;
    });
  }
  return state;
}
