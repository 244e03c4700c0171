import { ConfigError, intSetting } from "../config";
import { DEFAULT_RETRY_SCHEDULE, parseDuration } from "../events/delivery";

/** Settings of asynchronous generation, from the environment (README: Asynchronous generation). */
export interface GenerationSettings {
  /** GENERATION_TIMEOUT: a task not finished this long after submission ends as `timeout`. */
  timeoutMs: number;
  /** GENERATION_WORKERS: tasks one process runs at once. */
  workers: number;
  /** GENERATION_LEASE: how long a claim lasts before another process may take the task over (crash recovery). */
  leaseMs: number;
  /** GENERATION_POLL: how often idle workers look for due tasks (new tasks also wake them at once in-process). */
  pollMs: number;
  /** GENERATION_UPSTREAM_POLL: interval between checks of an upstream job (video). */
  upstreamPollMs: number;
  /** GENERATION_MAX_ATTEMPTS: claims of a task that never reached the upstream job stage before it fails. */
  maxAttempts: number;
  /** GENERATION_RETRY_BACKOFF: first delay after a transient upstream failure; doubles per attempt (max 30 s). */
  retryBackoffMs: number;
  /** GENERATION_SYNC_WAIT: longest a `mode: sync` request waits before answering with the unfinished task. */
  syncWaitMs: number;
  /** GENERATION_TASK_RETENTION: tasks older than this are archived out of the cost lookup. */
  retentionMs: number;
  /** GENERATION_ARCHIVE_INTERVAL: how often the archiver and the settlement sweeper run. */
  archiveIntervalMs: number;
  /** GENERATION_CALLBACK_RETRY_SCHEDULE: delays between per-task callback attempts. */
  callbackRetryMs: number[];
  /** GENERATION_CALLBACK_TIMEOUT: success window of one callback attempt. */
  callbackTimeoutMs: number;
  /** PUBLIC_URL: origin for polling and output URLs; default the request's own origin. */
  publicUrl?: string;
  /** MEDIA_DIR: where generated files are stored; default DATA_DIR/media. */
  mediaDir?: string;
}

function duration(env: Record<string, string | undefined>, name: string, fallback: string): number {
  const raw = env[name] || fallback;
  try {
    const ms = parseDuration(raw);
    if (ms <= 0) throw new Error("must be positive");
    return ms;
  } catch (e) {
    throw new ConfigError(`${name}: ${(e as Error).message}`);
  }
}

export function generationSettings(env: Record<string, string | undefined>): GenerationSettings {
  const publicUrl = env.PUBLIC_URL?.replace(/\/+$/, "") || undefined;
  if (publicUrl && !/^https?:\/\/[^/]+$/.test(publicUrl)) throw new ConfigError(`PUBLIC_URL must be an origin like https://gateway.example.com (got "${publicUrl}")`);
  // An upstream call runs under the lease minus one second (so it never outlives its claim).
  if (env.GENERATION_LEASE && duration(env, "GENERATION_LEASE", "5m") < 2_000) throw new ConfigError("GENERATION_LEASE must be at least 2s");
  const schedule = (env.GENERATION_CALLBACK_RETRY_SCHEDULE || DEFAULT_RETRY_SCHEDULE).split(",").filter((x) => x.trim());
  return {
    timeoutMs: duration(env, "GENERATION_TIMEOUT", "15m"),
    workers: intSetting(env, "GENERATION_WORKERS", 8, 1),
    leaseMs: duration(env, "GENERATION_LEASE", "5m"),
    pollMs: duration(env, "GENERATION_POLL", "1s"),
    upstreamPollMs: duration(env, "GENERATION_UPSTREAM_POLL", "5s"),
    maxAttempts: intSetting(env, "GENERATION_MAX_ATTEMPTS", 3, 1),
    retryBackoffMs: duration(env, "GENERATION_RETRY_BACKOFF", "1s"),
    // Below the HTTP server's idle timeout (255 s), which would cut a silent response off.
    syncWaitMs: Math.min(duration(env, "GENERATION_SYNC_WAIT", "240s"), 250_000),
    retentionMs: duration(env, "GENERATION_TASK_RETENTION", "720h"),
    archiveIntervalMs: duration(env, "GENERATION_ARCHIVE_INTERVAL", "1m"),
    callbackRetryMs: schedule.map((d) => {
      try {
        return parseDuration(d);
      } catch (e) {
        throw new ConfigError(`GENERATION_CALLBACK_RETRY_SCHEDULE: ${(e as Error).message}`);
      }
    }),
    callbackTimeoutMs: duration(env, "GENERATION_CALLBACK_TIMEOUT", "10s"),
    publicUrl,
    mediaDir: env.MEDIA_DIR || undefined,
  };
}
