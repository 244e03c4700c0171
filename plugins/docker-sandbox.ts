/**
 * Example sandbox backend plugin: each sandbox is a Docker container, driven through the
 * `docker` command line. It shows the whole contract a backend implements (src/sandboxes/backend.ts):
 * the lifecycle (templateProblem, create, destroy, liveness, sweep) and one capability,
 * `processes` (exec). Like every plugin here it imports only types; its helpers arrive as the
 * argument of its default export.
 *
 * Loaded at start-up from the default PLUGINS_DIR (./plugins); it runs nothing until an
 * instance and a template are configured in CONFIG_FILE:
 *
 *   { "providers": { "docker": { "plugin": "docker-sandbox", "image": "debian:bookworm-slim" } },
 *     "sandboxes": { "templates": { "debian": { "backend": "docker" } } } }
 *
 * A template may name its own image (`"image": "python:3.12-slim"`).
 */
import type { BackendState, CreateSpec, ExecResult, ExecSpec, Liveness, PluginApi, SandboxTemplate } from "../src/plugin-api";

/** Output kept per stream of a command; the rest is cut, as the built-in backend does. */
const MAX_OUTPUT_BYTES = 1024 * 1024;
/** Every container this plugin starts carries this label, so `sweep` finds leftovers. */
const LABEL = "gateway.sandbox";

export default ({ definePlugin, BackendError, CANCELLED_MARKER, Type }: PluginApi) => {
  const docker = async (bin: string, args: string[], timeoutMs = 60_000): Promise<{ code: number; out: string; err: string }> => {
    const proc = Bun.spawn([bin, ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe", timeout: timeoutMs });
    const [out, err, code] = await Promise.all([capped(proc.stdout), capped(proc.stderr), proc.exited]);
    return { code, out, err };
  };

  return definePlugin({
    kind: "sandbox",
    name: "docker-sandbox",
    description: "Example: sandboxes as Docker containers (docker CLI)",
    serves: ["processes"],
    configSchema: Type.Object({
      /** The image of templates that name none. */
      image: Type.String({ minLength: 1 }),
      /** The docker CLI. */
      docker: Type.String({ default: "docker" }),
    }),
    templateFields: { image: Type.Optional(Type.String({ minLength: 1 })) },
    create: (config) => {
      const containerOf = (state: BackendState) => String(state.container);
      return {
        templateProblem: (template: SandboxTemplate<{ image?: string }>) =>
          Bun.which(config.docker) ? undefined : `the docker-sandbox backend needs '${config.docker}': install the Debian package 'docker.io' (template ${template.id})`,

        async create(spec: CreateSpec<{ image?: string }>): Promise<BackendState> {
          const container = `sandbox-${spec.sandboxId}`;
          const r = spec.resources;
          const run = await docker(config.docker, [
            "run", "--detach", "--name", container, "--label", `${LABEL}=${spec.sandboxId}`,
            // Threats: the host's network and services, privilege escalation, exhausting the
            // host. No network, no capabilities, no setuid gains, an unprivileged user, and
            // the sandbox's resources as the container's limits.
            "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "1000:1000",
            "--memory", `${r.memoryMB}m`, "--cpus", String(r.cpuCount), "--pids-limit", String(r.pids),
            ...Object.entries(spec.envVars).flatMap(([k, v]) => ["--env", `${k}=${v}`]),
            spec.template.image ?? config.image,
            "sleep", "infinity",
          ]);
          if (run.code !== 0) throw new BackendError(502, `docker run failed: ${run.err.trim() || `exit code ${run.code}`}`);
          return { container };
        },

        async destroy(_id: string, state: BackendState): Promise<void> {
          const rm = await docker(config.docker, ["rm", "--force", containerOf(state)]);
          // Already gone counts as destroyed.
          if (rm.code !== 0 && !/No such container/i.test(rm.err)) throw new Error(`docker rm failed: ${rm.err.trim()}`);
        },

        async liveness(_id: string, state: BackendState): Promise<Liveness> {
          const r = await docker(config.docker, ["inspect", "--format", "{{.State.Running}}", containerOf(state)]);
          return r.code === 0 && r.out.trim() === "true" ? "running" : "gone";
        },

        async sweep(liveIds: Set<string>): Promise<void> {
          const r = await docker(config.docker, ["ps", "--all", "--filter", `label=${LABEL}`, "--format", `{{.Names}} {{.Label "${LABEL}"}}`]);
          for (const line of r.out.split("\n").filter(Boolean)) {
            const [name, id] = line.split(" ");
            if (!liveIds.has(id)) await docker(config.docker, ["rm", "--force", name]);
          }
        },

        async exec(_id: string, state: BackendState, spec: ExecSpec): Promise<ExecResult> {
          // Every process of this command inherits the marker: what the timeout or the
          // caller's abort ends inside the container (killing the docker client alone would
          // leave the command running there).
          const marker = `GATEWAY_EXEC=${crypto.randomUUID()}`;
          const env = Object.entries(spec.envVars).flatMap(([k, v]) => ["--env", `${k}=${v}`]);
          const proc = Bun.spawn([config.docker, "exec", "--env", marker, ...env, containerOf(state), spec.cmd, ...spec.args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
          let ended: "timeout" | "cancelled" | undefined;
          const stop = (why: "timeout" | "cancelled") => () => {
            ended ??= why;
            const kill = `for p in /proc/[0-9]*; do grep -qz '^${marker}$' $p/environ 2>/dev/null && kill -KILL \${p#/proc/}; done; true`;
            void docker(config.docker, ["exec", containerOf(state), "sh", "-c", kill]).finally(() => proc.kill("SIGKILL"));
          };
          const onTimeout = stop("timeout");
          const onAbort = stop("cancelled");
          const timer = setTimeout(onTimeout, spec.timeoutMs);
          spec.signal?.addEventListener("abort", onAbort, { once: true });
          try {
            const [stdout, stderr, exitCode] = await Promise.all([capped(proc.stdout), capped(proc.stderr), proc.exited]);
            // The built-in backend's codes: 124 after the timeout, 130 when the caller stopped waiting.
            if (ended === "timeout") return { stdout, stderr, exitCode: 124 };
            if (ended === "cancelled") return { stdout, stderr: stderr + CANCELLED_MARKER, exitCode: 130 };
            return { stdout, stderr, exitCode };
          } finally {
            clearTimeout(timer);
            spec.signal?.removeEventListener("abort", onAbort);
          }
        },
      };
    },
  });
};

/** A stream's text, at most MAX_OUTPUT_BYTES of it; the rest is read and dropped. */
async function capped(stream: ReadableStream<Uint8Array>): Promise<string> {
  const chunks: Uint8Array[] = [];
  let kept = 0;
  for await (const chunk of stream) {
    if (kept >= MAX_OUTPUT_BYTES) continue;
    const part = chunk.subarray(0, MAX_OUTPUT_BYTES - kept);
    chunks.push(part);
    kept += part.byteLength;
  }
  return Buffer.concat(chunks).toString("utf8");
}
