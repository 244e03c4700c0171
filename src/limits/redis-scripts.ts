import { RedisClient } from "bun";
import type { Logger } from "../log";

/**
 * Lua scripts run on a Redis server shared by the service's processes (the request
 * windows of redis.ts, the token windows of redis-tokens.ts), each call bounded by a
 * timeout. The caller answers from its own process's window whenever this is not
 * `ready()` or a call fails: limits stay in force per process rather than failing open
 * or taking the gateway down.
 */
export class RedisScripts {
  private readonly client: RedisClient;
  /** Script text -> its digest on the server, once loaded. */
  private readonly shas = new Map<string, string>();
  private lastWarn = 0;
  private reconnecting?: Promise<void>;
  private nextReconnectAt = 0;

  constructor(
    url: string,
    private readonly log: Logger,
    /** What the scripts keep ("rate limits", "token limits"), for the log lines. */
    private readonly what: string,
    private readonly timeoutMs = 250,
  ) {
    // No offline queue and no built-in reconnect loop (it holds connect() for ~30 s):
    // while disconnected a call fails at once, the caller's fallback answers, and
    // reconnect() tries again at most once a second.
    this.client = new RedisClient(url, { enableOfflineQueue: false, autoReconnect: false, connectionTimeout: 2_000 });
  }

  /** Connects and loads `scripts`; a failure here is logged, not fatal (the fallback applies). */
  async start(scripts: string[] = []): Promise<void> {
    this.nextReconnectAt = Date.now() + 1_000;
    try {
      await this.client.connect();
      for (const script of scripts) this.shas.set(script, await this.client.send("SCRIPT", ["LOAD", script]));
    } catch (err) {
      this.warn(`cannot reach Redis at start-up; ${this.what} are per process until it answers`, err);
    }
  }

  /** Whether calls can go to Redis now; when not, a reconnect is tried (at most once a second). */
  ready(): boolean {
    if (this.client.connected) return true;
    this.reconnect();
    return false;
  }

  /** Runs `script` with its keys and arguments; rejects after the timeout. */
  async run(script: string, keys: string[], args: string[]): Promise<number> {
    const params = [String(keys.length), ...keys, ...args];
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    const call = async (): Promise<number> => {
      const sha = this.shas.get(script);
      if (sha) {
        try {
          return await this.client.send("EVALSHA", [sha, ...params]);
        } catch (err) {
          // NOSCRIPT: Redis restarted or was flushed; load the script again below.
          if (!String((err as Error).message).includes("NOSCRIPT")) throw err;
        }
      }
      const loaded: string = await this.client.send("SCRIPT", ["LOAD", script]);
      this.shas.set(script, loaded);
      return await this.client.send("EVALSHA", [loaded, ...params]);
    };
    try {
      return await Promise.race([call(), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Logs at most one warning per 10 s: a Redis outage must not flood the log. */
  warn(msg: string, err: unknown): void {
    const now = Date.now();
    if (now - this.lastWarn < 10_000) return;
    this.lastWarn = now;
    this.log.warn(msg, { err });
  }

  close(): void {
    this.client.close();
  }

  private reconnect(): void {
    if (this.reconnecting || Date.now() < this.nextReconnectAt) return;
    this.nextReconnectAt = Date.now() + 1_000;
    this.reconnecting = this.client
      .connect()
      .then(() => this.log.info(`Redis reachable again; ${this.what} are shared`))
      .catch((err) => this.warn(`Redis still unreachable; ${this.what} are per process`, err))
      .finally(() => {
        this.reconnecting = undefined;
      });
  }
}
