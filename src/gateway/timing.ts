/**
 * `Server-Timing` of a model response (`gateway;dur=`, `upstream;dur=`), so anyone can
 * check the gateway's overhead from the response alone: `upstream` is the answering
 * attempt's time to the upstream's response headers (its first bytes); `gateway` is the
 * request's time in the service (from arrival, so authentication and body parsing count)
 * minus every wait on an upstream, fallback attempts included.
 */
export class Timing {
  private waited = 0;
  private firstByte = 0;
  private from = 0;

  constructor(private readonly startedAt: number) {}

  /** An attempt goes upstream now. */
  sent(): void {
    this.from = performance.now();
  }

  /** The attempt's response headers arrived. */
  answered(): void {
    if (this.from) this.firstByte = performance.now() - this.from;
  }

  /** The gateway no longer waits on this attempt (answer read, first chunk in, or failed). */
  done(): void {
    if (!this.from) return;
    this.waited += performance.now() - this.from;
    this.from = 0;
  }

  header(): string {
    const total = performance.now() - this.startedAt;
    return `gateway;dur=${ms(Math.max(total - this.waited, 0))}, upstream;dur=${ms(this.firstByte)}`;
  }
}

const ms = (v: number) => (Math.round(v * 10) / 10).toString();
