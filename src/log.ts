import type { LogLevel } from "./settings";

/**
 * Structured JSON logs, one object per line on stdout.
 * Lines are buffered and flushed on a short timer so that access logging does not
 * cost a write syscall per request on the hot path; `flush()` runs at shutdown.
 */
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /**
   * A line whose fields are already JSON (`"a":1,"b":"x"`, no braces): for the access log,
   * written once per request, where building and serializing an object is a visible cost.
   * The caller guarantees `json` is valid JSON members.
   */
  raw(level: LogLevel, msg: string, json: string): void;
  child(fields: Record<string, unknown>): Logger;
  enabled(level: LogLevel): boolean;
  flush(): void;
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

let lastMs = -1;
let lastIso = "";
let secondStart = -1;
/** `YYYY-MM-DDTHH:MM:SS.` of the second `secondStart` begins. */
let secondPrefix = "";
/**
 * The current time in RFC 3339 (as toISOString writes it), the date and time formatted
 * once per second and the milliseconds appended: a line per request stamps a new
 * millisecond most of the time, and toISOString was a visible cost of the access log.
 */
export function isoNow(ms = Date.now()): string {
  if (ms === lastMs) return lastIso;
  lastMs = ms;
  const millis = ms % 1000;
  if (ms - millis !== secondStart) {
    secondStart = ms - millis;
    secondPrefix = new Date(secondStart).toISOString().slice(0, -4);
  }
  lastIso = secondPrefix + (millis < 10 ? "00" : millis < 100 ? "0" : "") + millis + "Z";
  return lastIso;
}

export function createLogger(level: LogLevel, base: Record<string, unknown> = {}, sink = stdoutSink()): Logger {
  const min = RANK[level];
  const baseJson = Object.keys(base).length ? "," + JSON.stringify(base).slice(1, -1) : "";
  const emit = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (RANK[lvl] < min) return;
    const rec: Record<string, unknown> = { time: isoNow(), level: lvl, msg, ...base, ...fields };
    if (rec.err instanceof Error) rec.err = { message: rec.err.message, stack: rec.err.stack };
    sink.write(JSON.stringify(rec) + "\n");
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    raw: (lvl, msg, json) => {
      if (RANK[lvl] < min) return;
      sink.write(`{"time":"${isoNow()}","level":"${lvl}","msg":${JSON.stringify(msg)}${baseJson}${json ? "," + json : ""}}\n`);
    },
    child: (fields) => createLogger(level, { ...base, ...fields }, sink),
    enabled: (lvl) => RANK[lvl] >= min,
    flush: () => sink.flush(),
  };
}

export interface Sink {
  write(line: string): void;
  flush(): void;
}

let sharedSink: Sink | undefined;

function stdoutSink(): Sink {
  if (sharedSink) return sharedSink;
  let buffer: string[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  const flush = () => {
    timer = undefined;
    if (buffer.length === 0) return;
    const chunk = buffer.join("");
    buffer = [];
    process.stdout.write(chunk);
  };
  sharedSink = {
    write(line) {
      buffer.push(line);
      if (buffer.length >= 512) flush();
      else if (!timer) timer = setTimeout(flush, 20);
    },
    flush() {
      if (timer) clearTimeout(timer);
      flush();
    },
  };
  process.once("beforeExit", () => sharedSink?.flush());
  return sharedSink;
}
