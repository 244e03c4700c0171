import type { Db } from "../db/client";
import { type NewEvent, recordEvents } from "../events/record";
import type { Logger } from "../log";

const EVENT_BATCH_MS = 250;

/**
 * The sandbox service's process.completed events, written off the response path. They do
 * not hold up the response and are written in batches, one transaction each: with the
 * embedded database every commit is a disk write on the service's own thread. Its own
 * module because it is one job apart from the sandbox lifecycle (service.ts).
 */
export class BatchedEvents {
  /** Events not yet written. */
  private queuedEvents: NewEvent[] = [];
  private writing: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
  ) {}

  /** Waits until every queued event is written (shutdown, tests). */
  async flush(): Promise<void> {
    while (this.writing || this.queuedEvents.length) await (this.writing ?? this.writeQueued());
  }

  queueEvent(e: NewEvent): void {
    this.queuedEvents.push(e);
    if (!this.writing) this.writing = Bun.sleep(EVENT_BATCH_MS).then(() => this.writeQueued());
  }

  private async writeQueued(): Promise<void> {
    const batch = this.queuedEvents;
    this.queuedEvents = [];
    try {
      if (batch.length) {
        await recordEvents(this.db, batch);
      }
    } catch (e) {
      this.log.error("process.completed events not written", { count: batch.length, err: e });
    } finally {
      this.writing = undefined;
      if (this.queuedEvents.length) this.writing = Bun.sleep(EVENT_BATCH_MS).then(() => this.writeQueued());
    }
  }
}
