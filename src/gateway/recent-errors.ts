/**
 * The last upstream failures of this process (a fixed-size ring), for the operator's
 * providers page: which provider failed, when, with what. Threat: an upstream's error
 * text may echo what it was sent; only the first characters are kept, and the page is
 * the admin's alone (GET /admin/gateway/providers).
 */
export interface UpstreamFailure {
  time: string;
  provider: string;
  model: string;
  /** The upstream's status, or 0 when it gave none (unreachable, timed out, empty answer). */
  status: number;
  error: string;
  requestId: string;
}

const KEEP = 50;
const MESSAGE_CHARS = 300;

export class RecentErrors {
  private readonly ring: UpstreamFailure[] = [];
  private next = 0;

  add(f: Omit<UpstreamFailure, "time" | "error"> & { error: string }): void {
    const entry = { ...f, time: new Date().toISOString(), error: f.error.slice(0, MESSAGE_CHARS) };
    if (this.ring.length < KEEP) this.ring.push(entry);
    else this.ring[this.next] = entry;
    this.next = (this.next + 1) % KEEP;
  }

  /** Newest first. */
  list(): UpstreamFailure[] {
    const n = this.ring.length;
    const out: UpstreamFailure[] = [];
    for (let i = 1; i <= n; i++) out.push(this.ring[(this.next - i + n) % n]);
    return out;
  }
}
