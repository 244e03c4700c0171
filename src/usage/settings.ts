import type { Settings } from "../settings";

/** Request-log settings (docs/gateway.md: Usage API and request log), from the settings module. */
export interface RequestLogSettings {
  /** Characters of each request and response body kept; 0 = bodies are never stored. */
  bodyChars: number;
  /** Request rows older than this are summed into usage_hourly and deleted; 0 = kept forever. */
  retentionDays: number;
  /** How often the pruner runs. */
  pruneEveryMs: number;
}

export function requestLogSettings(r: Settings["requestLog"]): RequestLogSettings {
  return { bodyChars: r.bodies ? r.bodyChars : 0, retentionDays: r.retentionDays, pruneEveryMs: r.pruneMs };
}
