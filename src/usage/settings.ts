import { boolSetting, intSetting } from "../config";

/** Request-log settings, read once at start-up (a bad value stops the service, naming the variable). */
export interface RequestLogSettings {
  /** Characters of each request and response body kept; 0 = bodies are never stored. */
  bodyChars: number;
  /** Request rows older than this are summed into usage_hourly and deleted; 0 = kept forever. */
  retentionDays: number;
  /** How often the pruner runs. */
  pruneEveryMs: number;
}

/** Bodies kept with REQUEST_LOG_BODIES=true: enough to recognise a request, not a transcript store. */
const DEFAULT_BODY_CHARS = 4096;

export function requestLogSettings(env: Record<string, string | undefined>): RequestLogSettings {
  const bodies = boolSetting(env, "REQUEST_LOG_BODIES", false);
  return {
    bodyChars: bodies ? intSetting(env, "REQUEST_LOG_BODY_CHARS", DEFAULT_BODY_CHARS, 1) : 0,
    retentionDays: intSetting(env, "REQUEST_LOG_RETENTION_DAYS", 30),
    pruneEveryMs: intSetting(env, "REQUEST_LOG_PRUNE_MS", 3_600_000, 1000),
  };
}
