/**
 * Every response carries X-Request-ID (spec: What the service does, 8). A sane inbound
 * id is echoed so a caller can correlate across hops; anything else (too long, odd
 * characters that could forge log lines) is replaced by a fresh one.
 */
const SANE = /^[A-Za-z0-9._:-]{1,128}$/;

// Ids need to be unique, not secret: a random per-process prefix (18 hex digits) plus a
// counter is unique across processes and costs a fraction of a UUID per request. The
// counter starts at 2^52, so it always prints as 14 hex digits (no padding per request)
// until 2^53 - 4.5e15 requests later.
const PROCESS_PREFIX = "req_" + crypto.randomUUID().replaceAll("-", "").slice(0, 18);
const COUNTER_START = 2 ** 52;
let counter = COUNTER_START;

export function requestIdFor(request: Request): string {
  const inbound = request.headers.get("x-request-id");
  if (inbound && SANE.test(inbound)) return inbound;
  if (++counter >= Number.MAX_SAFE_INTEGER) counter = COUNTER_START;
  return PROCESS_PREFIX + counter.toString(16);
}
