import { ApiError } from "../http/errors";
import type { Services } from "../services";

/**
 * Open session streams per API key and per organization, in this process. Threat: a
 * stream is held open for as long as the client likes; without a cap one key can open
 * streams until the process runs out of sockets or memory for everyone. Beyond a cap the
 * open is refused with 429 (rate_limit_error in the agent family) before any work is done.
 */
export class StreamSlots {
  private readonly perKey = new Map<string, number>();
  private readonly perOrg = new Map<string, number>();

  constructor(private readonly limits: { perKey: number; perOrg: number }) {}

  /** Takes a slot or throws 429; the returned function gives it back (once, however often it is called). */
  acquire(organizationId: string, keyId: string): () => void {
    const k = this.perKey.get(keyId) ?? 0;
    const o = this.perOrg.get(organizationId) ?? 0;
    if (k >= this.limits.perKey) throw new ApiError(429, `too many open session streams for this API key (at most ${this.limits.perKey}); close one first`);
    if (o >= this.limits.perOrg) throw new ApiError(429, `too many open session streams for this organization (at most ${this.limits.perOrg}); close one first`);
    this.perKey.set(keyId, k + 1);
    this.perOrg.set(organizationId, o + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      decrement(this.perKey, keyId);
      decrement(this.perOrg, organizationId);
    };
  }

  /** Streams open in this process (tests). */
  open(organizationId: string): number {
    return this.perOrg.get(organizationId) ?? 0;
  }
}

function decrement(m: Map<string, number>, id: string): void {
  const n = (m.get(id) ?? 1) - 1;
  if (n > 0) m.set(id, n);
  else m.delete(id);
}

const slots = new WeakMap<Services, StreamSlots>();
export function streamSlotsOf(s: Services): StreamSlots {
  let x = slots.get(s);
  if (!x) slots.set(s, (x = new StreamSlots({ perKey: s.config.agents.streamsPerKey, perOrg: s.config.agents.streamsPerOrg })));
  return x;
}
