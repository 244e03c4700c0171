import { RedisClient } from "bun";
import type { Logger } from "../log";

/** A candidate's shared state: consecutive failures seen by all replicas, and the end of its cool-down (0: none). */
export interface SharedHealth {
  failures: number;
  until: number;
}

/**
 * Provider cool-downs and failure counts shared by every replica through Redis
 * (REDIS_URL): after one replica cooled a failing upstream down, the others stop
 * sending to it too, and failures seen by different replicas add up.
 *
 * The router keeps answering from its own map (no Redis call on the request path);
 * this mirrors changes both ways: a failure adds to a hash on the server (HINCRBY) and
 * is published; a success after failures clears them and is published; every replica
 * applies what it hears. A replica that starts reads the cool-downs running. Redis
 * being away costs nothing but the sharing: each replica then counts alone.
 */
export class SharedCooldowns {
  private readonly cmd: RedisClient;
  private readonly sub: RedisClient;
  private readonly channel: string;
  private readonly failuresKey: string;
  private readonly untilKey: string;
  private lastWarn = 0;

  constructor(
    url: string,
    prefix: string,
    private readonly log: Logger,
    private readonly opts: { cooldownFailures: number; cooldownMs: number },
    /** Applies another replica's news (undefined: the candidate recovered). */
    private readonly apply: (key: string, health: SharedHealth | undefined) => void,
  ) {
    this.cmd = new RedisClient(url, { enableOfflineQueue: false, connectionTimeout: 2_000 });
    this.sub = new RedisClient(url, { connectionTimeout: 2_000 });
    this.channel = `${prefix}cooldowns`;
    this.failuresKey = `${prefix}cooldowns:failures`;
    this.untilKey = `${prefix}cooldowns:until`;
  }

  async start(): Promise<void> {
    try {
      await this.cmd.connect();
      await this.sub.subscribe(this.channel, (message) => this.heard(message));
      const running = (await this.cmd.send("HGETALL", [this.untilKey])) as Record<string, string> | string[] | null;
      const entries = Array.isArray(running) ? pairs(running) : Object.entries(running ?? {});
      const now = Date.now();
      for (const [key, until] of entries) if (Number(until) > now) this.apply(key, { failures: this.opts.cooldownFailures, until: Number(until) });
    } catch (err) {
      this.warn("cannot reach Redis; provider cool-downs are per process until it answers", err);
    }
  }

  /** A candidate failed here: count it for every replica; the threshold starts the cool-down everywhere. */
  failed(key: string): void {
    void this.run(async () => {
      const failures = Number(await this.cmd.send("HINCRBY", [this.failuresKey, key, "1"]));
      // Failure counts are consecutive ones; a count nobody touched for a while is stale.
      await this.cmd.send("PEXPIRE", [this.failuresKey, String(Math.max(60_000, this.opts.cooldownMs * 2))]);
      const until = failures >= this.opts.cooldownFailures ? Date.now() + this.opts.cooldownMs : 0;
      if (until) {
        await this.cmd.send("HSET", [this.untilKey, key, String(until)]);
        await this.cmd.send("PEXPIRE", [this.untilKey, String(Math.max(60_000, this.opts.cooldownMs * 2))]);
      }
      await this.cmd.send("PUBLISH", [this.channel, JSON.stringify({ key, failures, until })]);
    });
  }

  /** A candidate that had failed answered here: it is healthy for every replica. */
  succeeded(key: string): void {
    void this.run(async () => {
      await this.cmd.send("HDEL", [this.failuresKey, key]);
      await this.cmd.send("HDEL", [this.untilKey, key]);
      await this.cmd.send("PUBLISH", [this.channel, JSON.stringify({ key, reset: true })]);
    });
  }

  async stop(): Promise<void> {
    try {
      await this.sub.unsubscribe();
    } catch {
      // Not subscribed.
    }
    this.sub.close();
    this.cmd.close();
  }

  private heard(message: string): void {
    let m: { key?: unknown; failures?: unknown; until?: unknown; reset?: unknown };
    try {
      m = JSON.parse(message);
    } catch {
      return;
    }
    if (typeof m.key !== "string") return;
    if (m.reset === true) return this.apply(m.key, undefined);
    if (typeof m.failures === "number" && typeof m.until === "number") this.apply(m.key, { failures: m.failures, until: m.until });
  }

  private async run(fn: () => Promise<void>): Promise<void> {
    if (!this.cmd.connected) return;
    try {
      await fn();
    } catch (err) {
      this.warn("a provider cool-down was not shared through Redis", err);
    }
  }

  /** At most one warning per 10 s: a Redis outage must not flood the log. */
  private warn(msg: string, err: unknown): void {
    const now = Date.now();
    if (now - this.lastWarn < 10_000) return;
    this.lastWarn = now;
    this.log.warn(msg, { err });
  }
}

function pairs(flat: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i], flat[i + 1]]);
  return out;
}
