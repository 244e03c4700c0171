import { statfsSync } from "node:fs";
import type { Logger } from "../log";
import type { LogLevel } from "../settings";
import { type DbFault, dbFaultOf } from "./faults";

/** What the tracker needs of the database (client.ts's Database has it). */
export interface Pingable {
  kind: "pglite" | "postgres";
  ping(): Promise<void>;
  /** Where the database is, for the log line: "127.0.0.1:5432", or the embedded database's DATA_DIR. */
  location?: string;
}

export interface AvailabilityOptions {
  /** How often a faulted database is probed until it answers again. */
  probeMs?: number;
  /**
   * A server that reported disk full is not probed for space (it is elsewhere): it counts as
   * recovered once this long has passed without another disk-full error.
   */
  fullHoldMs?: number;
  /** The embedded database counts as having space again above this many free bytes under DATA_DIR. */
  minFreeBytes?: number;
}

interface Current extends DbFault {
  since: number;
  lastSeen: number;
  /** Not logged (a relapse right after recovery): its end is not logged either. */
  quiet: boolean;
}

/**
 * A fault that starts again this soon after the last one ended is the same outage
 * (a connection attempt begun before the server came back failing just after the
 * probe's succeeded): the state follows it, the log does not get a line per flap.
 */
const RELAPSE_MS = 10_000;

/**
 * The database's availability as the service sees it: one per process, fed by every
 * request or background task that hit a database fault (see faults.ts).
 *
 * Threat: an outage under load turned every request into an error line with a stack,
 * burying the cause; and /readyz kept answering 200 on a full disk (`select 1` needs no
 * space), so an orchestrator kept sending writes. Here the first fault logs ONE line
 * naming the cause, later ones only refresh the state, /readyz answers 503 while it lasts,
 * and a probe in the background notices recovery (logged once too) without a restart:
 * postgres.js reconnects by itself, PGlite writes again once space is back.
 */
export class DatabaseAvailability {
  private current: Current | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private probing = false;
  private clearedAt = Number.NEGATIVE_INFINITY;
  private readonly probeMs: number;
  private readonly fullHoldMs: number;
  private readonly minFreeBytes: number;

  constructor(
    private readonly database: Pingable,
    private readonly log: Logger,
    opts: AvailabilityOptions = {},
  ) {
    this.probeMs = opts.probeMs ?? 1000;
    this.fullHoldMs = opts.fullHoldMs ?? 15_000;
    this.minFreeBytes = opts.minFreeBytes ?? 4 * 1024 * 1024;
  }

  /** The fault in force, if any. */
  get fault(): DbFault | undefined {
    return this.current;
  }

  /** Records a fault; logs it when it starts (or changes kind). Returns whether `err` was one. */
  report(err: unknown): boolean {
    const fault = dbFaultOf(err);
    if (!fault) return false;
    const now = Date.now();
    if (this.current?.kind === fault.kind) {
      this.current.lastSeen = now;
      return true;
    }
    const quiet = !this.current && now - this.clearedAt < RELAPSE_MS;
    this.current = { ...fault, since: now, lastSeen: now, quiet };
    if (!quiet) this.log.error(this.describe(fault), { database: this.database.kind, code: fault.code, retryAfterSeconds: fault.retryAfter });
    this.timer ??= setInterval(() => void this.probe(), this.probeMs);
    this.timer.unref?.();
    return true;
  }

  /** /readyz: true when the database answers and no fault is in force (probing once more if one is). */
  async ready(): Promise<boolean> {
    if (this.current) await this.probe();
    if (this.current) return false;
    try {
      await this.database.ping();
      return true;
    } catch (err) {
      this.report(err);
      return false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One probe while a fault is in force; clears it when the database is usable again. */
  private async probe(): Promise<void> {
    if (this.probing || !this.current) return;
    this.probing = true;
    try {
      await this.database.ping();
      const fault = this.current;
      if (fault && fault.kind === "full" && !this.hasSpace(fault)) return;
      if (fault) this.clear(fault);
    } catch (err) {
      this.report(err);
    } finally {
      this.probing = false;
    }
  }

  private hasSpace(fault: Current): boolean {
    if (this.database.kind === "pglite" && this.database.location && !this.database.location.startsWith("memory://")) {
      try {
        const s = statfsSync(this.database.location);
        return s.bavail * s.bsize >= this.minFreeBytes;
      } catch {
        return false;
      }
    }
    return Date.now() - fault.lastSeen >= this.fullHoldMs;
  }

  private clear(fault: Current): void {
    this.current = undefined;
    this.clearedAt = Date.now();
    this.stop();
    if (!fault.quiet) this.log.info("database available again", { database: this.database.kind, afterSeconds: Math.round((Date.now() - fault.since) / 100) / 10 });
  }

  /** The one log line: what failed, where, and why. */
  private describe(fault: DbFault): string {
    const where = this.database.location;
    if (this.database.kind === "pglite") {
      const what = fault.kind === "full" ? "disk full" : "unavailable";
      return `embedded database: ${what}${where ? ` under DATA_DIR=${where}` : ""} (${fault.code}): ${fault.reason}`;
    }
    const what = fault.kind === "full" ? "full" : "unreachable";
    return `database ${what}${where ? ` at ${where}` : ""}: ${fault.reason} (${fault.code})`;
  }
}

/**
 * The service's logger with database faults routed through `availability`: a warning or
 * error whose `err` is one (a request's, a background poll's) becomes the single fault line
 * instead of a stack per occurrence. Everything else passes through unchanged.
 */
export function faultAwareLogger(log: Logger, availability: () => DatabaseAvailability | undefined): Logger {
  const guard = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    const a = fields?.err !== undefined ? availability() : undefined;
    if (a && a.report(fields!.err)) return;
    if (level === "warn") log.warn(msg, fields);
    else log.error(msg, fields);
  };
  return {
    debug: (m, f) => log.debug(m, f),
    info: (m, f) => log.info(m, f),
    warn: (m, f) => guard("warn", m, f),
    error: (m, f) => guard("error", m, f),
    raw: (lvl, msg, json) => log.raw(lvl, msg, json),
    child: (fields) => faultAwareLogger(log.child(fields), availability),
    enabled: (lvl) => log.enabled(lvl),
    flush: () => log.flush(),
  };
}
