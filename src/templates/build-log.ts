import type { Logger } from "../log";
import type { LogEntry, LogLevel, TemplateStore } from "./store";

const FLUSH_MS = 200;
/** A build that prints without end (a `yes` in a RUN) keeps its first lines and its last: the middle is dropped with a note. */
const MAX_ENTRIES = 20_000;

/**
 * A build's log: lines are numbered as they come and written in batches, so the SDK's
 * polling (by offset) sees them while the step still runs, without a database write per line.
 */
export class BuildLog {
  private pending: LogEntry[] = [];
  private written = 0;
  private dropped = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private writing: Promise<void> = Promise.resolve();
  /** The last lines of the step that runs now: the reason of a failed step carries them. */
  readonly tail: LogEntry[] = [];

  constructor(
    private readonly store: TemplateStore,
    private readonly buildId: string,
    private readonly log: Logger,
  ) {}

  add(level: LogLevel, message: string, step?: string): void {
    const entry: LogEntry = { timestamp: new Date().toISOString(), level, message, ...(step ? { step } : {}) };
    this.tail.push(entry);
    if (this.tail.length > 30) this.tail.shift();
    if (this.written + this.pending.length >= MAX_ENTRIES) {
      this.dropped++;
      return;
    }
    this.pending.push(entry);
    this.timer ??= setTimeout(() => this.flushSoon(), FLUSH_MS);
  }

  info(message: string, step?: string): void {
    this.add("info", message, step);
  }

  private flushSoon(): void {
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    const from = this.written;
    this.written += batch.length;
    this.writing = this.writing.then(() => this.store.appendLogs(this.buildId, batch, from)).catch((err) => this.log.error("template build log not written", { buildId: this.buildId, err }));
  }

  /** Writes what is pending; the build's status changes only after its log is complete (the SDK reads the log to the end once it sees the status). */
  async close(): Promise<void> {
    if (this.dropped) this.pending.push({ timestamp: new Date().toISOString(), level: "warn", message: `${this.dropped} log lines were dropped (a build keeps at most ${MAX_ENTRIES})` });
    this.dropped = 0;
    if (this.timer) clearTimeout(this.timer);
    this.flushSoon();
    await this.writing;
  }
}
