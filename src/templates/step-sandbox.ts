/**
 * Where a build step runs: a sandbox of the template's parent layers, made by the sandbox
 * backend that runs image templates (the local one), with the resources and the network
 * policy any sandbox gets, whose writable upper layer becomes the step's layer.
 *
 * Build sandboxes are the backend's own, not rows of the sandbox API: they are not listed,
 * billed or counted in an organization's sandbox quota, and the builder destroys each one
 * when its step ends (a service restart fails the build; start-up reconciliation removes
 * what is left, as for any sandbox the database does not know).
 */
import { newId } from "../ids";
import type { BackendState, SandboxBackend, SandboxResources, SpawnSpec } from "../sandboxes/backend";
import type { EgressRules } from "../sandboxes/network";
import { readdirSync } from "node:fs";
import { lines, markedText } from "../streams/lines";
import type { ImageConfig, LayerStore } from "./layers";

export interface StepSandbox {
  /** Runs a shell script as the sandbox's root; each output line goes to `onLine`. Resolves with the exit code. */
  run(script: string, onLine: (line: string) => void, signal?: AbortSignal): Promise<number>;
  /** Writes a file (as the sandbox's root sees it). */
  writeFile(path: string, data: Uint8Array): Promise<void>;
  /** The upper layer as a stored layer's digest; undefined when the step changed nothing. */
  commit(): Promise<string | undefined>;
  destroy(): Promise<void>;
}

export interface StepSandboxes {
  start(layers: string[], config: ImageConfig): Promise<StepSandbox>;
}

/** What the backend's sandbox state says about its root, once a sandbox of layers runs (providers/local). */
interface RootState {
  upperDir?: string;
  idBase?: number;
}

/** A backend that can say where a sandbox of layers writes (its overlay's upper directory). */
interface UpperDirs {
  upperDir?(id: string, state: BackendState): string | undefined;
}

export interface BackendStepSandboxesOptions {
  backend: SandboxBackend;
  backendName: string;
  layers: LayerStore;
  resources: SandboxResources;
  network?: EgressRules;
  timeoutSec: number;
  /** Where a sandbox's upper directory is when the backend does not say (UpperDirs). */
  upperDirOf?: (id: string, state: BackendState) => string | undefined;
}

const NEVER_POOLED_MB = 2 ** 40;

export class BackendStepSandboxes implements StepSandboxes {
  constructor(private readonly o: BackendStepSandboxesOptions) {}

  async start(layers: string[], config: ImageConfig): Promise<StepSandbox> {
    const { backend } = this.o;
    const id = newId("sbx_");
    // memoryMB: what the template "asks" when nothing else does, which only the local backend's warm
    // pool reads (the create passes its resources). The pool starts sandboxes for a template only in
    // memory that creates leave, so a one-off step template that asks more than any host has is never
    // pooled: no idle sandboxes of a layer stack that no create will ask for again.
    const template = { id: `build-${id}`, backend: this.o.backendName, layers, imageConfig: config, memoryMB: NEVER_POOLED_MB };
    const state: BackendState = await backend.create({ sandboxId: id, template, envVars: {}, metadata: {}, timeoutSec: this.o.timeoutSec, resources: this.o.resources, ...(this.o.network ? { network: this.o.network } : {}) });
    const store = this.o.layers;
    const upperDirOf = this.o.upperDirOf;
    let destroyed = false;
    return {
      async run(script, onLine, signal) {
        if (!backend.spawn) throw new Error(`sandbox backend '${template.backend}' cannot run processes with streamed output`);
        // As the sandbox's root (its user namespace's, unprivileged on the host): the scripts switch to the step's user themselves.
        const spec = { argv: ["/bin/sh", "-c", script], env: {}, cwd: "/", user: "root" } as SpawnSpec;
        const p = backend.spawn(id, state, spec);
        const kill = () => p.kill("SIGKILL");
        signal?.addEventListener("abort", kill, { once: true });
        p.closeStdin();
        try {
          await Promise.all([pump(p.stdout, onLine), pump(p.stderr, onLine)]);
          return await p.exited;
        } finally {
          signal?.removeEventListener("abort", kill);
        }
      },
      async writeFile(path, data) {
        if (!backend.writeFile) throw new Error(`sandbox backend '${template.backend}' offers no filesystem`);
        await backend.writeFile(id, state, path, data);
      },
      async commit() {
        const root = state as RootState;
        const upper = (backend as SandboxBackend & UpperDirs).upperDir?.(id, state) ?? root.upperDir ?? upperDirOf?.(id, state);
        if (!upper) throw new Error(`sandbox backend '${template.backend}' did not give its sandbox an upper layer to commit`);
        return store.commitLayer(upper, { idBase: root.idBase }).then((digest) => (isEmptyLayer(store, digest) ? undefined : digest));
      },
      async destroy() {
        if (destroyed) return;
        destroyed = true;
        await backend.destroy(id, state);
      },
    };
  }
}

/** An upper directory with nothing in it makes no layer (the overlay takes at most so many). */
function isEmptyLayer(store: LayerStore, digest: string): boolean {
  try {
    return readdirSync(store.path(digest)).length === 0;
  } catch {
    return false;
  }
}

async function pump(stream: ReadableStream<Uint8Array>, onLine: (line: string) => void): Promise<void> {
  // A build log line is a line of text, not a megabyte: long ones are cut with a mark.
  for await (const line of lines(stream, { maxBytes: 16 * 1024 })) onLine(markedText(line));
}
