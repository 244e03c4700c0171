import { join } from "node:path";
import { DEFAULT_RESOURCES, definePlugin, egressPolicyFromEnv, Type } from "../../src/plugin-api";
import { LocalBackend, type LocalLimits } from "./backend";
import { HostMemory } from "./host-memory";
import { parseUpstreams, systemUpstreams } from "./network/upstream";
import { localTemplateFields } from "./template";
import { LayerStore } from "../../src/templates/layers";

/**
 * Sandboxes on this host, isolated with bubblewrap (Linux namespaces) - the embedded
 * default: enabled with no configuration. Configure limits under
 * `providers.local` in CONFIG_FILE.
 */
const configSchema = Type.Object({
  /** Directory for per-sandbox home and /tmp; default DATA_DIR/sandboxes. */
  root: Type.Optional(Type.String()),
  /** Started, unused sandboxes kept ready per template, so creation skips the bwrap start; 0 disables. */
  warmPool: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
  /** Where to look for bwrap and the util-linux tools, PATH-style; default the service's PATH. */
  toolPath: Type.Optional(Type.String()),
  /**
   * Run sandboxes without a cgroup each: no per-sandbox memory, CPU and process limits
   * (only the per-process rlimits below). For hosts where the service cannot create
   * cgroups; without this setting, sandbox creation there answers 503.
   */
  withoutCgroups: Type.Optional(Type.Boolean()),
  limits: Type.Optional(
    Type.Object({
      /** Processes per sandbox uid (rlimit; the per-sandbox cap is the template's `pids`). */
      processes: Type.Optional(Type.Integer({ minimum: 8 })),
      /** Address space per process, MiB. */
      memoryMB: Type.Optional(Type.Integer({ minimum: 64 })),
      /** CPU seconds per process. */
      cpuSeconds: Type.Optional(Type.Integer({ minimum: 1 })),
      /** Largest file a process may write, MiB. */
      fileSizeMB: Type.Optional(Type.Integer({ minimum: 1 })),
      openFiles: Type.Optional(Type.Integer({ minimum: 64 })),
      /** stdout and stderr bytes kept per command. */
      outputBytes: Type.Optional(Type.Integer({ minimum: 1024 })),
    }),
  ),
});

export const DEFAULT_LIMITS: LocalLimits = {
  processes: 256,
  memoryMB: 2048,
  cpuSeconds: 3600,
  fileSizeMB: 1024,
  openFiles: 4096,
  outputBytes: 1024 * 1024,
};

export default definePlugin({
  kind: "sandbox",
  name: "local",
  description: "Sandboxes on this host in bubblewrap namespaces (user, pid, mount, ipc, uts, net, cgroup), each in a cgroup of its own, with a network under an egress policy (pasta, nftables)",
  serves: ["processes", "filesystem", "pause", "network"],
  templateFields: localTemplateFields,
  nodeLocal: true,
  configSchema,
  // Zero configuration on by default; SANDBOX_LOCAL=off disables it, and
  // SANDBOX_LOCAL=without-cgroups runs it without per-sandbox limits (withoutCgroups).
  fromEnv: (env) => (env.SANDBOX_LOCAL === "off" ? undefined : env.SANDBOX_LOCAL === "without-cgroups" ? { withoutCgroups: true } : {}),
  create(config, ctx) {
    return new LocalBackend({
      root: config.root ?? join(ctx.dataDir, "sandboxes"),
      limits: { ...DEFAULT_LIMITS, ...config.limits },
      warmPool: config.warmPool ?? 2,
      withoutCgroups: config.withoutCgroups ?? false,
      defaultResources: DEFAULT_RESOURCES,
      // Checked at start-up (src/settings/providers.ts); a ceiling per sandbox, so over 1 is overcommit.
      hostMemory: HostMemory.ofHost(Number(ctx.env.SANDBOX_HOST_MEMORY_SHARE?.trim() || 1.5)),
      log: ctx.log,
      layers: new LayerStore(ctx.dataDir),
      path: config.toolPath ?? ctx.env.PATH,
      // SANDBOX_NETWORK=off: no namespace, no pasta; every sandbox has its loopback only.
      network:
        ctx.env.SANDBOX_NETWORK === "off"
          ? undefined
          : { upstreams: ctx.env.SANDBOX_DNS_SERVERS ? parseUpstreams(ctx.env.SANDBOX_DNS_SERVERS) : systemUpstreams(), operatorAllow: egressPolicyFromEnv(ctx.env).allow },
    });
  },
});
