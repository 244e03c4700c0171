/**
 * Every response carries X-Request-ID (spec: What the service does, 8). A sane inbound
 * id is echoed so a caller can correlate across hops; anything else (too long, odd
 * characters that could forge log lines) is replaced by a fresh one.
 */
const SANE = /^[A-Za-z0-9._:-]{1,128}$/;

// Ids need to be unique, not secret: a random per-process prefix plus a counter is
// unique across processes and costs a fraction of a UUID per request.
const PROCESS_PREFIX = "req_" + crypto.randomUUID().replaceAll("-", "").slice(0, 16);
let counter = 0;

export function requestIdFor(request: Request): string {
  const inbound = request.headers.get("x-request-id");
  if (inbound && SANE.test(inbound)) return inbound;
  counter = (counter + 1) % Number.MAX_SAFE_INTEGER;
  return PROCESS_PREFIX + counter.toString(16).padStart(16, "0");
}
