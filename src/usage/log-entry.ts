/**
 * A request log entry as the usage API answers it (src/usage/queries.ts, routes.ts). Types
 * only, with no imports, so the console's browser code (src/console/ui) reads the same
 * declaration instead of a copy.
 */
export interface FailedAttempt {
  provider: string;
  model: string;
  /** The upstream's status; 0 when it gave none (unreachable, timed out). */
  status: number;
  error: string;
}

export interface LogEntry {
  id: string;
  time: string;
  organizationId: string;
  /** Names as they are now (null when the organization or key no longer exists). */
  organizationName: string | null;
  keyId: string;
  keyName: string | null;
  requestId: string;
  surface: string;
  model: string;
  upstreamModel: string | null;
  provider: string | null;
  attempts: number;
  failedAttempts: FailedAttempt[];
  status: number;
  streamed: boolean;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  cacheWrite1hTokens: number;
  reasoningTokens: number;
  inputAudioTokens: number;
  outputAudioTokens: number;
  estimated: boolean;
  cost: number | null;
  latencyMs: number;
  requestBody: string | null;
  responseBody: string | null;
  responseBytes: number;
}
