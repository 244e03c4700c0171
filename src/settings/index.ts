import { NETWORK_MODES } from "../sandboxes/network";
import { PROVIDER_VARIABLES } from "./providers";
import { cidrList, corsOrigins, directory, hostAndPort, httpUrl, optionalPath, origin, packageRegistries, pathOrExisting, postgresUrl, redisUrl, secretKey } from "./values";
import { duration, durationList, integer, matching, oneOf, optionalInteger, optionalText, text, Variable, yesNo } from "./variable";

export { ConfigError, parseDuration } from "./variable";
export type { CorsOrigins } from "./values";
export { decodeKey } from "./values";

export const LOG_LEVELS = ["debug", "info", "warn", "error", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const DEFAULT_EVENTS_RETRY_SCHEDULE = "5s,5m,30m,2h,5h,10h,10h";

/**
 * Every environment variable the service reads, each once, at start-up (docs/configuration.md
 * lists the same names, generated from here and ./reference.ts). Modules get the typed values through
 * `Services.config`; none reads the environment itself. A value that does not parse stops
 * start-up with the variable's name and what it accepts.
 */
export const SETTINGS = {
  port: integer("PORT", 8080, { max: 65535 }),
  host: text("HOST", "0.0.0.0"),
  // The service keeps files beside its database (media, the webhook secrets key), so its
  // data directory is a real one; an in-memory database is a test helper's, not a setting.
  dataDir: directory("DATA_DIR", "./data"),
  /** postgres://... selects a real PostgreSQL server; unset means embedded PGlite in dataDir. */
  databaseUrl: postgresUrl("DATABASE_URL"),
  /** The embedded database runs on a thread of its own instead of the service's. */
  pgliteThread: yesNo("PGLITE_THREAD", false),
  /** docs/operations.md: Workers. Service processes on PORT; unset: the cores with DATABASE_URL, 1 on the embedded database (src/workers/count.ts). */
  workers: optionalInteger("WORKERS", { min: 1, max: 256 }),
  redisUrl: redisUrl("REDIS_URL"),
  /** Enables the admin REST API when set. */
  adminToken: optionalText("ADMIN_TOKEN", { secret: true }),
  /** Extra plugins: ./plugins when it exists (a folder PLUGINS_DIR names must exist). */
  pluginsDir: pathOrExisting("PLUGINS_DIR", "plugins"),
  configFilePath: optionalPath("CONFIG_FILE"),
  logLevel: oneOf("LOG_LEVEL", LOG_LEVELS, "info", { anyCase: true }),
  /** Create organization `default` and print one key when the database is empty. */
  bootstrap: yesNo("BOOTSTRAP", true),
  /** Largest accepted request body, in bytes (spec: 10 MB for all requests). */
  bodyLimitBytes: integer("BODY_LIMIT_BYTES", 10 * 1024 * 1024),
  corsOrigins: corsOrigins("CORS_ORIGINS"),
  /** Origin for URLs the service hands out (polling, outputs, endpoint URLs); default the request's own. */
  publicUrl: origin("PUBLIC_URL"),
  allocator: {
    tuning: yesNo("GATEWAY_ALLOCATOR_TUNING", true),
    /** Read by the allocator itself at process start; the service only checks whether it is set. */
    purgeDelay: optionalInteger("MIMALLOC_PURGE_DELAY", { min: -1 }),
    /** Read by the allocator itself; `serve` passes an operator's value on when it replaces itself. */
    purgeHoles: optionalInteger("MIMALLOC_PURGE_HOLES", { min: 0, max: 1 }),
  },
  keyCache: {
    // false where LISTEN cannot work (a transaction-pooling proxy in front of PostgreSQL);
    // the poll alone then bounds how late a revocation arrives.
    listen: yesNo("KEY_CACHE_LISTEN", true),
    resyncMs: integer("KEY_CACHE_RESYNC_MS", 5_000, { min: 10 }),
  },
  limits: {
    /** The platform-wide cap in requests per minute (0: none). */
    globalRpm: integer("RATE_LIMIT_RPM", 0),
    redisKeyPrefix: text("REDIS_KEY_PREFIX", "gateway:"),
  },
  metering: {
    flushMs: integer("USAGE_FLUSH_MS", 1000, { min: 1 }),
  },
  /** docs/gateway.md: Usage API and request log. */
  requestLog: {
    /** Threat: prompts and answers are the tenants' data; they are kept only when the operator opts in. */
    bodies: yesNo("REQUEST_LOG_BODIES", false),
    /** Kept per body with REQUEST_LOG_BODIES: enough to recognise a request, not a transcript store. */
    bodyChars: integer("REQUEST_LOG_BODY_CHARS", 4096, { min: 1 }),
    retentionDays: integer("REQUEST_LOG_RETENTION_DAYS", 30),
    pruneMs: integer("REQUEST_LOG_PRUNE_MS", 3_600_000, { min: 1000 }),
  },
  egress: {
    /** Addresses exempt from the public-address check; plain http is allowed to them. */
    allow: cidrList("EGRESS_ALLOW_CIDRS"),
  },
  events: {
    /** Success window per attempt (spec: 2xx within 10 s). */
    deliveryTimeoutMs: integer("EVENTS_DELIVERY_TIMEOUT_MS", 10_000, { min: 1 }),
    /** Delay before retry n; after the last one the delivery is exhausted. */
    retryScheduleMs: durationList("EVENTS_RETRY_SCHEDULE", DEFAULT_EVENTS_RETRY_SCHEDULE),
    deliveryConcurrency: integer("EVENTS_DELIVERY_CONCURRENCY", 256, { min: 1 }),
    receiverConcurrency: integer("EVENTS_RECEIVER_CONCURRENCY", 16, { min: 1 }),
    pollMs: integer("EVENTS_POLL_MS", 1000, { min: 1 }),
    /** Encrypts webhook signing secrets at rest; the embedded database makes its own key file when unset. */
    secretsKey: secretKey("SECRETS_KEY"),
  },
  sandboxes: {
    reaperIntervalMs: integer("SANDBOX_REAPER_INTERVAL_MS", 1000, { min: 10 }),
    /** README: Replicas. Where other replicas reach this sandbox node; unset: its own loopback address (replicas on one host). */
    nodeUrl: httpUrl("SANDBOX_NODE_URL"),
    /** How often a sandbox node writes its heartbeat; three missed ones mark it lost with its sandboxes. */
    nodeHeartbeatMs: integer("SANDBOX_NODE_HEARTBEAT_MS", 5000, { min: 50 }),
    /** Labels of this sandbox node that templates may pin (`nodeLabel`); placement: sandboxes/placement.ts. */
    nodeLabels: matching("SANDBOX_NODE_LABELS", /^\s*[A-Za-z0-9._-]{1,63}\s*(,\s*[A-Za-z0-9._-]{1,63}\s*)*$/, "a comma-separated list of labels (letters, digits, '.', '_', '-')").map((v) => (v ?? "").split(",").map((l) => l.trim()).filter(Boolean)),
    /** A `claude` executable for the `claude` template (read where the default templates are made: sandboxes/claude-code.ts). */
    claudeCodeBin: optionalPath("CLAUDE_CODE_BIN"),
    /** docs/sandboxes.md: Sandbox networks. off: no sandbox gets a network; none or internet: the default of a new one. */
    network: oneOf("SANDBOX_NETWORK", NETWORK_MODES, "none"),
    /** Base domain of `<port>-<sandboxID>.<domain>` host routing (wildcard DNS and a TLS proxy in front); unset: no host routing. */
    domain: hostAndPort("SANDBOX_DOMAIN"),
    /** docs/sandboxes.md: Sandbox quotas. Defaults of every organization; the admin API and CLI set an organization's own. */
    orgMaxSandboxes: integer("SANDBOX_ORG_MAX_SANDBOXES", 50, { min: 0 }),
    orgMaxMemoryMB: integer("SANDBOX_ORG_MAX_MEMORY_MB", 65536, { min: 0 }),
    orgMaxCpus: integer("SANDBOX_ORG_MAX_CPUS", 50, { min: 0 }),
    /** README: Templates. What template build steps may reach besides the internet (a package mirror on a private address): addresses, CIDR blocks or domain names. */
    /** README: Templates. A stored template layer younger than this is never garbage-collected (an import or build may not have recorded it yet). */
    layerGraceMs: integer("TEMPLATE_LAYER_GRACE_MS", 3_600_000, { min: 0 }),
    buildAllowOut: matching("TEMPLATE_BUILD_ALLOW_OUT", /^\s*[A-Za-z0-9.*:_\/-]+\s*(,\s*[A-Za-z0-9.*:_\/-]+\s*)*$/, "a comma-separated list of addresses, CIDR blocks or domain names").map((v) => (v ?? "").split(",").map((h) => h.trim()).filter(Boolean)),
  },
  agents: {
    leaseMs: integer("AGENT_LEASE_MS", 30_000, { min: 200 }),
    recoveryMs: integer("AGENT_RECOVERY_INTERVAL_MS", 1_000, { min: 20 }),
    maxSteps: integer("AGENT_MAX_STEPS", 50, { min: 1 }),
    sandboxIdleMs: integer("AGENT_SANDBOX_IDLE_MS", 300_000, { min: 100 }),
    sandboxTimeoutSec: integer("AGENT_SANDBOX_TIMEOUT_SEC", 3600, { min: 1 }),
    /** How often an idle stream follower re-reads the log anyway (the change feed wakes it at each commit; this covers a lost notice). */
    streamRecheckMs: integer("AGENT_STREAM_RECHECK_MS", 30_000, { min: 100 }),
    /** Open session event streams per API key and per organization, in each process (docs/security.md: Request limits). */
    streamsPerKey: integer("SESSION_STREAMS_PER_KEY", 100, { min: 1 }),
    streamsPerOrg: integer("SESSION_STREAMS_PER_ORG", 500, { min: 1 }),
    /** Where environment packages install from (`pip=<index URL>,npm=<registry URL>,...`); never a hard-coded public host. */
    packageRegistries: packageRegistries("AGENT_PACKAGE_REGISTRIES"),
    /** More hosts `allow_package_managers` opens (a registry's file host, e.g. where an index points downloads). */
    packageHosts: matching("AGENT_PACKAGE_HOSTS", /^\s*[A-Za-z0-9.*:_\/-]+\s*(,\s*[A-Za-z0-9.*:_\/-]+\s*)*$/, "a comma-separated list of host names, addresses or CIDR blocks").map((v) => (v ?? "").split(",").map((h) => h.trim()).filter(Boolean)),
  },
  deployments: {
    pollMs: integer("DEPLOYMENT_SCHEDULER_POLL_MS", 1000, { min: 10 }),
    pauseAfterFailures: integer("DEPLOYMENT_PAUSE_AFTER_FAILURES", 1, { min: 1 }),
  },
  generation: {
    /** A task not finished this long after submission ends as `timeout`. */
    timeoutMs: duration("GENERATION_TIMEOUT", "15m"),
    /** Tasks one process runs at once. */
    workers: integer("GENERATION_WORKERS", 8, { min: 1 }),
    /** How long a claim lasts before another process may take the task over. An upstream
     * call runs under the lease minus one second, so it never outlives its claim. */
    leaseMs: duration("GENERATION_LEASE", "5m", { min: 2_000, minText: "2s" }),
    /** How often idle workers look for due tasks (new tasks also wake them at once in-process). */
    pollMs: duration("GENERATION_POLL", "1s"),
    /** Interval between checks of an upstream job (video). */
    upstreamPollMs: duration("GENERATION_UPSTREAM_POLL", "5s"),
    /** Claims of a task that never reached the upstream job stage before it fails. */
    maxAttempts: integer("GENERATION_MAX_ATTEMPTS", 3, { min: 1 }),
    /** First delay after a transient upstream failure; doubles per attempt (max 30 s). */
    retryBackoffMs: duration("GENERATION_RETRY_BACKOFF", "1s"),
    /** Longest a `mode: sync` request waits; kept below the HTTP server's idle timeout
     * (255 s), which would cut a silent response off. */
    syncWaitMs: duration("GENERATION_SYNC_WAIT", "240s").map((ms) => Math.min(ms, 250_000)),
    /** Tasks older than this are archived out of the cost lookup. */
    retentionMs: duration("GENERATION_TASK_RETENTION", "720h"),
    /** How often the archiver and the settlement sweeper run. */
    archiveIntervalMs: duration("GENERATION_ARCHIVE_INTERVAL", "1m"),
    callbackRetryMs: durationList("GENERATION_CALLBACK_RETRY_SCHEDULE", DEFAULT_EVENTS_RETRY_SCHEDULE),
    /** Success window of one callback attempt. */
    callbackTimeoutMs: duration("GENERATION_CALLBACK_TIMEOUT", "10s"),
    /** Where generated files are stored; default DATA_DIR/media. */
    mediaDir: optionalPath("MEDIA_DIR"),
  },
  /** docs/operations.md: Observability. Metrics are off unless a token or a port is set; tracing unless an OTLP endpoint is. */
  observability: {
    metricsToken: optionalText("METRICS_TOKEN", { secret: true }),
    metricsPort: optionalInteger("METRICS_PORT", { min: 0, max: 65535 }),
    metricsHost: optionalText("METRICS_HOST"),
    metricsMaxModels: integer("METRICS_MAX_MODELS", 200, { min: 1 }),
    metricsMaxOrganizations: integer("METRICS_MAX_ORGANIZATIONS", 200, { min: 1 }),
    // The OpenTelemetry exporter's standard variables; URLs and headers are checked by
    // observability/otlp-config.ts, which knows the specification's rules for them.
    otlpEndpoint: httpUrl("OTEL_EXPORTER_OTLP_ENDPOINT"),
    otlpTracesEndpoint: httpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
    otlpHeaders: optionalText("OTEL_EXPORTER_OTLP_HEADERS", { secret: true }),
    otlpTracesHeaders: optionalText("OTEL_EXPORTER_OTLP_TRACES_HEADERS", { secret: true }),
    otelServiceName: text("OTEL_SERVICE_NAME", "gateway"),
    otelSdkDisabled: yesNo("OTEL_SDK_DISABLED", false),
    otelTracesExporter: optionalText("OTEL_TRACES_EXPORTER"),
  },
  /** The built-in provider plugins' own variables (src/settings/providers.ts). */
  providers: PROVIDER_VARIABLES,
};

type Tree = { [key: string]: Variable<unknown> | Tree };
type Values<T> = T extends Variable<infer V> ? V : { [K in keyof T]: Values<T[K]> };

export type Settings = Values<typeof SETTINGS>;

function readTree<T extends Tree>(tree: T, env: Record<string, string | undefined>): Values<T> {
  const out: Record<string, unknown> = {};
  for (const [key, node] of Object.entries(tree)) out[key] = node instanceof Variable ? node.read(env[node.name]) : readTree(node, env);
  return out as Values<T>;
}

/** Reads and checks every variable; the first bad one throws a ConfigError naming it. */
export function readSettings(env: Record<string, string | undefined>): Settings {
  return readTree(SETTINGS as Tree, env) as Settings;
}

function variablesOf(tree: Tree): Variable<unknown>[] {
  return Object.values(tree).flatMap((node) => (node instanceof Variable ? [node] : variablesOf(node)));
}

/** Every variable the service reads (docs/configuration.md's table is generated from them). */
export function settingVariables(): Variable<unknown>[] {
  return variablesOf(SETTINGS as Tree);
}

/** The names of every variable the service reads. */
export function variableNames(): string[] {
  return settingVariables().map((v) => v.name);
}
