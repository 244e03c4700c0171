/**
 * Every response carries X-Request-ID (spec: What the service does, 8). A sane inbound
 * id is echoed so a caller can correlate across hops; anything else (too long, odd
 * characters that could forge log lines) is replaced by a fresh one.
 */
const SANE = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestIdFor(request: Request): string {
  const inbound = request.headers.get("x-request-id");
  return inbound && SANE.test(inbound) ? inbound : "req_" + crypto.randomUUID().replaceAll("-", "");
}
