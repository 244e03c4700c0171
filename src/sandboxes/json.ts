import type { SandboxRow } from "./schema";

/** The spec's fixed `clientID`: the same constant for every sandbox. */
export const CLIENT_ID = "6532622b";

export const STATUSES = ["creating", "running", "paused", "stopped", "error"] as const;
export type SandboxStatus = (typeof STATUSES)[number];

export interface SandboxJson {
  sandboxID: string;
  templateID: string;
  clientID: string;
  metadata: Record<string, string>;
  startedAt: string;
  endAt: string;
  status: string;
}

export function sandboxJson(row: SandboxRow): SandboxJson {
  return {
    sandboxID: row.id,
    templateID: row.templateId,
    clientID: CLIENT_ID,
    metadata: row.metadata,
    startedAt: row.startedAt.toISOString(),
    endAt: row.endAt.toISOString(),
    status: row.status,
  };
}
