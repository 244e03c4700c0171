import { Cron } from "croner";
import { ApiError } from "../http/errors";

/** How many upcoming fire times a deployment shows (SDK: "up to 5"). */
export const UPCOMING_RUNS = 5;

const MONTHS = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC";
const DAYS = "SUN|MON|TUE|WED|THU|FRI|SAT";

/**
 * The 5 POSIX fields and what each may contain: numbers, `*`, lists, ranges and steps,
 * plus month and weekday names. croner would also accept L, W, #, ?, seconds and year
 * fields and @-shortcuts; the SDK documents them as unsupported, so they are refused
 * here before croner sees the expression (a schedule must mean the same thing on every
 * cron implementation a user might compare it with).
 */
const FIELDS: { name: string; pattern: RegExp }[] = [
  { name: "minute", pattern: /^[0-9*,/-]+$/ },
  { name: "hour", pattern: /^[0-9*,/-]+$/ },
  { name: "day-of-month", pattern: /^[0-9*,/-]+$/ },
  { name: "month", pattern: new RegExp(`^(?:[0-9*,/-]|${MONTHS})+$`, "i") },
  { name: "day-of-week", pattern: new RegExp(`^(?:[0-9*,/-]|${DAYS})+$`, "i") },
];

/**
 * IANA names only, spelled as the database spells them. `Intl` also accepts offsets
 * (`+02:00`) and any letter case (`utc`); both are refused so that what is stored is
 * exactly an IANA zone name.
 */
export function checkTimezone(timezone: string): void {
  let resolved: string | undefined;
  if (/^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/.test(timezone)) {
    try {
      resolved = new Intl.DateTimeFormat("en-US", { timeZone: timezone }).resolvedOptions().timeZone;
    } catch {
      resolved = undefined;
    }
  }
  if (resolved === undefined) throw new ApiError(400, `schedule.timezone '${timezone}' is not an IANA time zone (e.g. "UTC", "America/New_York")`);
  if (resolved !== timezone) throw new ApiError(400, `schedule.timezone '${timezone}' must be spelled as in the IANA database: '${resolved}'`);
}

function build(expression: string, timezone: string): Cron {
  // No callback: croner only computes times and never starts a timer. `domAndDow: false`
  // is POSIX (a day matches when either day field matches); "no-wildcard" makes every
  // expression without * or a step in minute and hour a fixed-time job (as Vixie cron
  // does): in a DST gap it runs at the first valid time after the gap, and a wall-clock
  // time that occurs twice (fall back) runs once, at its first occurrence.
  return new Cron(expression, { timezone, mode: "5-part", domAndDow: false, fixedTimeRule: "no-wildcard", sloppyRanges: false });
}

/**
 * Validates a schedule strictly (400 with the reason) and returns its normalised
 * expression (fields joined by single spaces).
 */
export function validateSchedule(expression: string, timezone: string, now: Date): string {
  if (expression.length > 200) throw new ApiError(400, "schedule.expression is longer than 200 characters");
  const trimmed = expression.trim();
  if (trimmed.startsWith("@")) throw new ApiError(400, `schedule.expression: shortcuts like '${trimmed}' are not supported; write the 5 fields (e.g. "0 0 * * *" for daily)`);
  const fields = trimmed.split(/\s+/).filter(Boolean);
  if (fields.length !== 5) {
    throw new ApiError(400, `schedule.expression must have exactly 5 fields (minute hour day-of-month month day-of-week), got ${fields.length}: seconds and year fields are not supported`);
  }
  fields.forEach((f, i) => {
    if (!FIELDS[i].pattern.test(f)) {
      throw new ApiError(400, `schedule.expression: the ${FIELDS[i].name} field '${f}' is not supported; use numbers, names (JAN-DEC, SUN-SAT), '*', ',', '-' and '/' only (L, W, # and ? are not supported)`);
    }
  });
  checkTimezone(timezone);
  const normalised = fields.join(" ");
  let cron: Cron;
  try {
    cron = build(normalised, timezone);
  } catch (e) {
    throw new ApiError(400, `schedule.expression: ${(e as Error).message.replace(/^CronPattern: /, "")}`);
  }
  if (!cron.nextRun(now)) throw new ApiError(400, `schedule.expression '${normalised}' never matches a date`);
  return normalised;
}

// Compiled schedules of stored deployments (already validated), shared by JSON rendering
// and the scheduler. Bounded: a miss only costs a parse.
const compiled = new Map<string, Cron>();

export function scheduleOf(expression: string, timezone: string): Cron {
  const key = `${timezone} ${expression}`;
  let c = compiled.get(key);
  if (!c) {
    if (compiled.size >= 1000) compiled.delete(compiled.keys().next().value!);
    compiled.set(key, (c = build(expression, timezone)));
  }
  return c;
}

/** The first fire time strictly after `t`, or null if the schedule never fires again. */
export function nextAfter(cron: Cron, t: Date): Date | null {
  return cron.nextRun(t);
}

export function upcoming(cron: Cron, from: Date, n = UPCOMING_RUNS): Date[] {
  return cron.nextRuns(n, from);
}

/**
 * The due time a late scheduler fires for: the latest fire time at or before `now`,
 * never earlier than the stored due time. Times between them were missed (the service
 * was down or busy) and are skipped: a deployment catches up with one run, not a burst.
 */
export function latestDue(cron: Cron, due: Date, now: Date): Date {
  // previousRuns looks strictly before its reference; one second later covers `now` itself.
  const latest = cron.previousRuns(2, new Date(now.getTime() + 1000)).find((d) => d.getTime() <= now.getTime());
  return latest && latest.getTime() > due.getTime() ? latest : due;
}
