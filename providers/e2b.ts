import type { Sandbox } from "@e2b/code-interpreter";
import {
  BackendError,
  type BackendState,
  CANCELLED_MARKER,
  type CreateSpec,
  type DirEntry,
  type ExecResult,
  type ExecSpec,
  definePlugin,
  type FullSandboxBackend,
  type Liveness,
  type PauseOptions,
  type SandboxTemplate,
  type TemplateFieldsOf,
  Type,
} from "../src/plugin-api";

/**
 * Sandboxes on E2B through the official SDK. A template with `"backend": "e2b"` runs
 * there (`remoteTemplate` names the E2B template, default the template id). Enabled
 * by E2B_API_KEY (plus optional E2B_DOMAIN, E2B_API_URL, E2B_SANDBOX_URL), or by a
 * `providers.e2b` entry in CONFIG_FILE.
 */
const configSchema = Type.Object({
  apiKey: Type.String({ minLength: 1 }),
  domain: Type.Optional(Type.String()),
  /** Overrides https://api.<domain> (self-hosted E2B, tests). */
  apiUrl: Type.Optional(Type.String()),
  /** Overrides the per-sandbox envd address. */
  sandboxUrl: Type.Optional(Type.String()),
  requestTimeoutMs: Type.Optional(Type.Integer({ minimum: 100 })),
  /** stdout and stderr characters kept per command. */
  outputBytes: Type.Optional(Type.Integer({ minimum: 1024 })),
});

/** Template fields of this backend (CONFIG_FILE `sandboxes.templates.<id>`). */
const templateFields = {
  /** The E2B template a template runs, when its name differs from the template id. */
  remoteTemplate: Type.Optional(Type.String()),
};
type E2BTemplateFields = TemplateFieldsOf<typeof templateFields>;

type E2BConfig = { apiKey: string; domain?: string; apiUrl?: string; sandboxUrl?: string; requestTimeoutMs?: number; outputBytes?: number };

interface E2BState extends BackendState {
  remoteId: string;
}

// Loaded on first use: the SDK is sizeable and most deployments never touch it.
let sdkModule: Promise<typeof import("@e2b/code-interpreter")> | undefined;
const sdk = () => (sdkModule ??= import("@e2b/code-interpreter"));

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

export class E2BBackend implements FullSandboxBackend<E2BTemplateFields> {
  /** Connected SDK handles; after a restart, the first call reconnects by id. */
  private readonly handles = new Map<string, Sandbox>();
  private readonly outputBytes: number;

  constructor(private readonly config: E2BConfig) {
    this.outputBytes = config.outputBytes ?? 1024 * 1024;
  }

  private get opts() {
    const { apiKey, domain, apiUrl, sandboxUrl, requestTimeoutMs } = this.config;
    return { apiKey, domain, apiUrl, sandboxUrl, requestTimeoutMs };
  }

  templateProblem(_template: SandboxTemplate<E2BTemplateFields>): string | undefined {
    return undefined;
  }

  async create(spec: CreateSpec<E2BTemplateFields>): Promise<BackendState> {
    const { Sandbox } = await sdk();
    const sbx = await Sandbox.create(spec.template.remoteTemplate ?? spec.template.id, {
      ...this.opts,
      timeoutMs: spec.timeoutSec * 1000,
      envs: spec.envVars,
      metadata: { ...spec.metadata, sandboxID: spec.sandboxId },
    });
    this.handles.set(spec.sandboxId, sbx);
    return { remoteId: sbx.sandboxId } satisfies E2BState;
  }

  private async handle(id: string, state: BackendState): Promise<Sandbox> {
    const cached = this.handles.get(id);
    if (cached) return cached;
    const { Sandbox } = await sdk();
    const sbx = await Sandbox.connect((state as E2BState).remoteId, this.opts);
    this.handles.set(id, sbx);
    return sbx;
  }

  async destroy(id: string, state: BackendState): Promise<void> {
    this.handles.delete(id);
    const { Sandbox } = await sdk();
    // false = already gone, which is what we want.
    await Sandbox.kill((state as E2BState).remoteId, this.opts);
  }

  async pause(id: string, state: BackendState, opts?: PauseOptions): Promise<void> {
    const { Sandbox } = await sdk();
    // E2B keeps memory unless told otherwise; its own keepMemory: false is a filesystem-only pause, as ours.
    await Sandbox.pause((state as E2BState).remoteId, { ...this.opts, ...(opts && !opts.keepMemory ? { keepMemory: false } : {}) });
    this.handles.delete(id);
  }

  async resume(id: string, state: BackendState, timeoutSec: number): Promise<void> {
    const { Sandbox } = await sdk();
    const sbx = await Sandbox.connect((state as E2BState).remoteId, { ...this.opts, ...(timeoutSec > 0 ? { timeoutMs: timeoutSec * 1000 } : {}) });
    this.handles.set(id, sbx);
  }

  async setTimeout(_id: string, state: BackendState, timeoutSec: number): Promise<void> {
    const { Sandbox } = await sdk();
    await Sandbox.setTimeout((state as E2BState).remoteId, timeoutSec * 1000, this.opts);
  }

  async exec(id: string, state: BackendState, spec: ExecSpec): Promise<ExecResult> {
    const sbx = await this.handle(id, state);
    // E2B runs a shell command line; quote every word so it means cmd + args exactly.
    const line = [spec.cmd, ...spec.args].map(q).join(" ");
    const { CommandExitError } = await sdk();
    // Started in the background so that at the timeout we can kill it: the SDK's own
    // timeout only drops the connection and leaves the process running in E2B.
    const handle = await sbx.commands.run(line, { envs: spec.envVars, background: true, timeoutMs: spec.timeoutMs + 10_000 });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      void handle.kill().catch(() => {});
    }, spec.timeoutMs);
    let cancelled = false;
    const cancel = () => {
      cancelled = true;
      void handle.kill().catch(() => {});
    };
    if (spec.signal?.aborted) cancel();
    else spec.signal?.addEventListener("abort", cancel, { once: true });
    try {
      const r = await handle.wait();
      return { stdout: this.cap(r.stdout, "stdout"), stderr: this.cap(r.stderr, "stderr"), exitCode: r.exitCode };
    } catch (e) {
      if (timedOut) return { stdout: this.cap(handle.stdout, "stdout"), stderr: `${this.cap(handle.stderr, "stderr")}\n[command timed out after ${spec.timeoutMs / 1000} s and was killed]\n`, exitCode: 124 };
      if (cancelled) return { stdout: this.cap(handle.stdout, "stdout"), stderr: this.cap(handle.stderr, "stderr") + CANCELLED_MARKER, exitCode: 130 };
      if (e instanceof CommandExitError) return { stdout: this.cap(e.stdout, "stdout"), stderr: this.cap(e.stderr, "stderr"), exitCode: e.exitCode };
      throw e;
    } finally {
      clearTimeout(timer);
      spec.signal?.removeEventListener("abort", cancel);
    }
  }

  private cap(s: string, stream: string): string {
    return s.length > this.outputBytes ? `${s.slice(0, this.outputBytes)}\n[${stream} truncated: output exceeded ${this.outputBytes} bytes]\n` : s;
  }

  async readFile(id: string, state: BackendState, path: string, maxBytes: number): Promise<Uint8Array> {
    const sbx = await this.handle(id, state);
    const info = await this.files(path, () => sbx.files.getInfo(path));
    if (info.type === "dir") throw new BackendError(400, `path is a directory: ${path}`);
    if (info.size > maxBytes) throw new BackendError(400, `file is larger than ${maxBytes} bytes: ${path}`);
    return this.files(path, () => sbx.files.read(path, { format: "bytes" }));
  }

  async writeFile(id: string, state: BackendState, path: string, data: Uint8Array): Promise<DirEntry> {
    const sbx = await this.handle(id, state);
    const info = await this.files(path, () => sbx.files.write(path, new Blob([data])));
    return { name: info.name, type: "file", path: info.path, size: data.length };
  }

  async remove(id: string, state: BackendState, path: string): Promise<void> {
    const sbx = await this.handle(id, state);
    if (!(await sbx.files.exists(path))) throw new BackendError(404, `file not found: ${path}`);
    await this.files(path, () => sbx.files.remove(path));
  }

  async list(id: string, state: BackendState, path: string): Promise<DirEntry[]> {
    const sbx = await this.handle(id, state);
    const info = await this.files(path, () => sbx.files.getInfo(path));
    if (info.type !== "dir") throw new BackendError(400, `path is not a directory: ${path}`);
    const entries = await this.files(path, () => sbx.files.list(path));
    return entries
      .map((e) => (e.type === "dir" ? { name: e.name, type: "dir" as const, path: e.path } : { name: e.name, type: "file" as const, path: e.path, size: e.size }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  private async files<T>(path: string, fn: () => Promise<T>): Promise<T> {
    const { FileNotFoundError } = await sdk();
    try {
      return await fn();
    } catch (e) {
      if (e instanceof FileNotFoundError) throw new BackendError(404, `file not found: ${path}`);
      throw e;
    }
  }

  async liveness(_id: string, state: BackendState): Promise<Liveness> {
    const { NotFoundError, Sandbox } = await sdk();
    try {
      const info = await Sandbox.getInfo((state as E2BState).remoteId, this.opts);
      return info.state === "paused" ? "paused" : "running";
    } catch (e) {
      if (e instanceof NotFoundError) return "gone";
      throw e;
    }
  }
}

export default definePlugin({
  kind: "sandbox",
  name: "e2b",
  description: "Sandboxes on E2B (or a self-hosted E2B) through @e2b/code-interpreter",
  serves: ["processes", "filesystem", "pause"],
  templateFields,
  configSchema,
  fromEnv: (env) =>
    env.E2B_API_KEY
      ? {
          apiKey: env.E2B_API_KEY,
          ...(env.E2B_DOMAIN ? { domain: env.E2B_DOMAIN } : {}),
          ...(env.E2B_API_URL ? { apiUrl: env.E2B_API_URL } : {}),
          ...(env.E2B_SANDBOX_URL ? { sandboxUrl: env.E2B_SANDBOX_URL } : {}),
        }
      : undefined,
  create: (config) => new E2BBackend(config),
});
