import { randomBytes } from "node:crypto";
import { readBodyText } from "../http/body";
import { ApiError } from "../http/errors";
import type { SpawnedProcess } from "../sandboxes/backend";
import { type SandboxService, stillRunning } from "../sandboxes/service";
import { boundedStream } from "../streams/bounded";
import { type Line, lines as readLines } from "../streams/lines";
import type { SandboxRef } from "./context";
import { templateNameOf } from "../templates/shipped";
import { KERNEL_NEEDS, kernelArgv, type Language, languageOf } from "./kernels";

/** Templates whose sandboxes run the code interpreter: the configured one, and an organization's build of the shipped definition (`code_interpreter[:tag]@<build>`, src/templates/shipped.ts). */
const INTERPRETER_TEMPLATES = new Set(["code_interpreter"]);
const MAX_CONTEXTS = 16;
const HOME = "/home/user";
/**
 * The longest output line of a kernel (one result: an image, a large repr). Printed text
 * comes in pieces far below it (kernel-bridge.ts); a result past it is replaced by an
 * error output saying so.
 */
export const MAX_OUTPUT_LINE_BYTES = 16 * 1024 * 1024;
const END = '{"type": "end_of_execution"}';
const enc = new TextEncoder();

interface Context {
  id: string;
  sandbox: SandboxRef;
  language: Language;
  cwd: string;
  bridge: SpawnedProcess;
  lines: AsyncGenerator<Line>;
  /** Executions of one context run one after another, as in a notebook. */
  busy: Promise<unknown>;
}

/**
 * The code interpreter on port 49999: `POST /execute` streams JSON lines, `/contexts`
 * creates, lists, restarts and removes contexts. Each context is one IPython kernel
 * inside the sandbox, owned by a bridge process (kernel-bridge.ts); contexts share the
 * sandbox's files but not their variables.
 */
export class Interpreter {
  private readonly contexts = new Map<string, Map<string, Promise<Context>>>();

  constructor(
    private readonly sandboxes: SandboxService,
    private readonly bodyLimit: number,
  ) {}

  async handle(request: Request, path: string, ref: SandboxRef): Promise<Response> {
    // A paused sandbox with autoResume wakes for its interpreter too.
    const row = await this.sandboxes.inUse(ref.organizationId, ref.sandboxId);
    if (!INTERPRETER_TEMPLATES.has(templateNameOf(row.templateId))) throw new ApiError(502, `the code interpreter runs in sandboxes of template code_interpreter; this one is ${row.templateId}`);
    // A paused sandbox's kernels are frozen: answer now rather than hang (E2B answers 502 too).
    if (row.status !== "running") throw new ApiError(502, `sandbox ${ref.sandboxId} is ${row.status}; connect to resume it`);
    const method = request.method;
    if (path === "/execute" && method === "POST") return this.execute(ref, await this.json(request), request);
    if (path === "/contexts" && method === "POST") {
      const body = await this.json(request);
      const language = languageOf(body.language);
      // The default contexts come first in the list, as on E2B where they exist from the
      // sandbox's start; all start at once (a kernel's start is most of a request's time).
      const defaults = this.defaultContexts(ref);
      const made = this.create(ref, language, typeof body.cwd === "string" ? body.cwd : HOME);
      await defaults;
      return Response.json(describe(await made));
    }
    if (path === "/contexts" && method === "GET") {
      await this.defaultContexts(ref);
      // A context whose kernel failed to start is not listed (it is gone from the table too).
      const all = await Promise.allSettled([...(this.contexts.get(ref.sandboxId)?.values() ?? [])]);
      return Response.json(all.flatMap((c) => (c.status === "fulfilled" ? [describe(c.value)] : [])));
    }
    const m = /^\/contexts\/([A-Za-z0-9_-]{1,64})(\/restart)?$/.exec(path);
    if (m && method === "DELETE" && !m[2]) {
      const ctx = await this.find(ref, m[1]);
      ctx.bridge.kill("SIGKILL");
      this.contexts.get(ref.sandboxId)?.delete(m[1]);
      return new Response(null, { status: 204 });
    }
    if (m && method === "POST" && m[2]) {
      const ctx = await this.find(ref, m[1]);
      await this.run(ctx, { restart: true }, async () => {});
      return new Response(null, { status: 204 });
    }
    throw new ApiError(404, `no such code interpreter endpoint: ${method} ${path}`);
  }

  /** The sandbox still runs (a kill claims its destroy before its processes end). */
  private async isRunning(ref: SandboxRef): Promise<boolean> {
    try {
      return stillRunning(await this.sandboxes.get(ref.organizationId, ref.sandboxId));
    } catch {
      return false;
    }
  }

  private async json(request: Request): Promise<Record<string, unknown>> {
    try {
      const v = JSON.parse((await readBodyText(request, this.bodyLimit)) || "{}");
      if (v && typeof v === "object" && !Array.isArray(v)) return v;
    } catch {
      // Answered below.
    }
    throw new ApiError(400, "the body must be a JSON object");
  }

  private async find(ref: SandboxRef, id: string): Promise<Context> {
    const ctx = this.contexts.get(ref.sandboxId)?.get(id);
    if (!ctx) throw new ApiError(404, `context ${id} not found`);
    return ctx;
  }

  /**
   * E2B's default contexts, Python's and JavaScript's, started together. Best effort: a host
   * without node still serves Python (the JavaScript context's own requests say what is missing).
   */
  private async defaultContexts(ref: SandboxRef): Promise<void> {
    const [python, javascript] = await Promise.allSettled([this.defaultContext(ref, "python"), this.defaultContext(ref, "javascript")]);
    if (python.status === "rejected") throw python.reason;
    // Killed meanwhile: say so, as any request to a killed sandbox's interpreter does.
    if (javascript.status === "rejected" && javascript.reason instanceof SandboxGone) throw javascript.reason;
  }

  /**
   * A language's default context (id: the language's name), started on the first request
   * that needs it: E2B starts its default kernels with the sandbox, here a sandbox that
   * never runs code costs no kernel, and a client sees them the same way (listed, used).
   */
  private defaultContext(ref: SandboxRef, language: Language): Promise<Context> {
    return this.contexts.get(ref.sandboxId)?.get(language) ?? this.create(ref, language, HOME, language);
  }

  private create(ref: SandboxRef, language: Language, cwd: string, id = randomBytes(12).toString("hex")): Promise<Context> {
    let byId = this.contexts.get(ref.sandboxId);
    if (!byId) this.contexts.set(ref.sandboxId, (byId = new Map()));
    // Threat: one client starting kernels without end (each holds memory in the sandbox).
    if (byId.size >= MAX_CONTEXTS) throw new ApiError(400, `at most ${MAX_CONTEXTS} contexts per sandbox; delete one first`);
    const starting = this.start(ref, id, language, cwd);
    byId.set(id, starting);
    starting.catch(() => byId.delete(id));
    return starting;
  }

  private async start(ref: SandboxRef, id: string, language: Language, cwd: string): Promise<Context> {
    const bridge = await this.sandboxes.spawn(ref.organizationId, ref.sandboxId, { argv: kernelArgv(language, cwd), env: {}, cwd });
    const lines = readLines(bridge.stdout, { maxBytes: MAX_OUTPUT_LINE_BYTES });
    // The kernel logs to stderr: drained (a full pipe would stall it), the tail kept for errors.
    let tail = "";
    const decoder = new TextDecoder();
    const drained = (async () => {
      for await (const c of bridge.stderr) tail = (tail + decoder.decode(c, { stream: true })).slice(-4096);
    })();
    void bridge.exited.then(() => {
      const byId = this.contexts.get(ref.sandboxId);
      byId?.delete(id);
      if (byId && !byId.size) this.contexts.delete(ref.sandboxId);
    });
    const first = await lines.next();
    if (first.done || !first.value.text.includes('"ready"')) {
      bridge.kill("SIGKILL");
      await Promise.race([drained, bridge.exited]);
      // Killed while its kernel started: say so, rather than blame the host's packages.
      if (!(await this.isRunning(ref))) throw sandboxGone(ref);
      throw new ApiError(502, `the ${language} kernel did not start (${KERNEL_NEEDS[language]}): ${tail.trim().split("\n").pop() ?? ""}`);
    }
    return { id, sandbox: ref, language, cwd, bridge, lines, busy: Promise.resolve() };
  }

  /**
   * Sends one request to the context's bridge and passes its lines on until
   * end_of_execution, each once `onLine` resolves (the client's pace). When `signal`
   * aborts (the client went away) the kernel is interrupted and the rest of the run's
   * output is read and dropped, so the context is ready for the next run; a run whose
   * client left while it waited for the context is not sent at all.
   */
  private run(ctx: Context, req: unknown, onLine: (line: Line) => Promise<void>, signal?: AbortSignal): Promise<void> {
    const next = ctx.busy.then(async () => {
      if (signal?.aborted) return;
      ctx.bridge.write(enc.encode(`${JSON.stringify(req)}\n`));
      let interrupted = false;
      const interrupt = () => {
        if (interrupted) return;
        interrupted = true;
        ctx.bridge.write(enc.encode('{"interrupt": true}\n'));
      };
      signal?.addEventListener("abort", interrupt, { once: true });
      try {
        for (;;) {
          const r = await ctx.lines.next();
          if (r.done) throw (await this.isRunning(ctx.sandbox)) ? new ApiError(502, "the context's kernel stopped") : sandboxGone(ctx.sandbox);
          if (r.value.text === END) return;
          if (!interrupted) await onLine(r.value);
        }
      } finally {
        signal?.removeEventListener("abort", interrupt);
      }
    });
    ctx.busy = next.catch(() => {});
    return next;
  }

  private async execute(ref: SandboxRef, body: Record<string, unknown>, request: Request): Promise<Response> {
    if (typeof body.code !== "string") throw new ApiError(400, "code is required (a string)");
    if (body.context_id !== undefined && body.context_id !== null && body.language !== undefined && body.language !== null) throw new ApiError(400, "give context_id or language, not both");
    const env = envVars(body.env_vars);
    let ctx: Context;
    try {
      ctx = typeof body.context_id === "string" ? await this.find(ref, body.context_id) : await this.defaultContext(ref, languageOf(body.language));
    } catch (e) {
      // Killed while the run's kernel started: the connection drops, as when it is killed
      // during the run, so the SDK says the same thing for both.
      if (e instanceof SandboxGone) return droppedResponse(e);
      throw e;
    }
    // Pull-based: output waits in the kernel's pipe while the client does not read, and
    // a client that goes away interrupts the run (boundedStream).
    const stream = boundedStream((sink) => this.run(ctx, { code: body.code, env }, (line) => sink.write(enc.encode(`${outputLine(line)}\n`)), sink.signal), {
      signal: request.signal,
      // The sandbox died under the run: the connection drops, as E2B's does with its
      // sandbox, and the SDKs report "the sandbox was killed while the request was in progress".
      drop: (e) => e instanceof SandboxGone,
      onError: (e) => enc.encode(`${errorLine("InterpreterError", e instanceof Error ? e.message : String(e))}\n`),
    });
    return new Response(stream, { headers: { "content-type": "application/x-ndjson" } });
  }
}

/** A response whose body fails before its first byte: the client sees the connection drop. */
function droppedResponse(e: Error): Response {
  return new Response(new ReadableStream({ start: (c) => c.error(e) }), { headers: { "content-type": "application/x-ndjson" } });
}

/** The sandbox was killed while a request to its interpreter was in progress. */
class SandboxGone extends ApiError {}

function sandboxGone(ref: SandboxRef): SandboxGone {
  return new SandboxGone(502, `The sandbox ${ref.sandboxId} was killed while the request was in progress`);
}

/** A kernel output line as sent; one past MAX_OUTPUT_LINE_BYTES becomes an error output (a cut JSON line would not parse). */
function outputLine(line: Line): string {
  if (!line.cut) return line.text;
  return errorLine("OutputTooLarge", `an output of ${MAX_OUTPUT_LINE_BYTES + line.cut} bytes is larger than the ${MAX_OUTPUT_LINE_BYTES} bytes one output may have; it was dropped`);
}

/** Per-run variables: an object of strings (E2B's server refuses anything else too). */
function envVars(v: unknown): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v) || Object.values(v).some((x) => typeof x !== "string")) throw new ApiError(400, "env_vars must be an object of strings");
  return v as Record<string, string>;
}

function errorLine(name: string, value: string): string {
  return JSON.stringify({ type: "error", name, value, traceback: "" });
}

function describe(c: Context) {
  return { id: c.id, language: c.language, cwd: c.cwd };
}
