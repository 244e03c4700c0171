import { catalogFor } from "../catalog";
import { enterRequest } from "../last-resort";
import type { Gateway, Incoming } from "./gateway";
import type { Protocol, Usage } from "./protocols";
import type { ResourceStore, StoredRow } from "./resource-store";

/**
 * Batch results metered at the vendors' batch prices (Catalog.batchCost), once: when
 * results are read, the first reader that gets them whole claims the batch
 * (ResourceStore.claimMetering) and one usage row per model is recorded, charged to the
 * key that created the batch. Reading the results again records nothing.
 *
 * Threat: a client that reads all but the end of a results stream, so the gateway never
 * sees the whole and never bills it. When the client goes away early, the rest of the
 * upstream's results are still read (and dropped) to finish the count.
 */
export interface BatchLine {
  model: string;
  usage: Usage;
}

/** Usage per model, summed over a batch's result lines. */
export class BatchTotals {
  readonly byModel = new Map<string, Usage>();

  add(line: BatchLine | undefined): void {
    if (!line || typeof line.model !== "string" || !line.model) return;
    const t = this.byModel.get(line.model) ?? { inputTokens: 0, outputTokens: 0 };
    const u = line.usage;
    t.inputTokens += u.inputTokens;
    t.outputTokens += u.outputTokens;
    for (const k of ["cachedTokens", "cacheWriteTokens", "cacheWrite1hTokens", "reasoningTokens", "inputAudioTokens", "outputAudioTokens"] as const) {
      if (u[k] !== undefined) t[k] = (t[k] ?? 0) + u[k]!;
    }
    this.byModel.set(line.model, t);
  }
}

/** Records a batch's usage if this caller is the first to claim it; one row per model. */
export async function meterBatch(g: Gateway, store: ResourceStore, inc: Incoming, row: StoredRow, surface: Protocol, totals: BatchTotals): Promise<void> {
  if (!totals.byModel.size || !(await store.claimMetering(row.id))) return;
  const catalog = catalogFor(g.s);
  const latencyMs = performance.now() - inc.startedAt;
  for (const [model, usage] of totals.byModel) {
    const cost = catalog.batchCost(model, usage);
    g.deps.meter.record({
      organizationId: row.organizationId,
      keyId: row.keyId,
      requestId: inc.requestId,
      surface,
      publicModel: model,
      upstreamModel: model,
      provider: row.provider,
      ...usage,
      ...(cost === undefined ? {} : { cost }),
      latencyMs,
      status: 200,
      streamed: false,
    });
  }
}

/**
 * A JSONL results body passed to the client chunk by chunk, each complete line handed to
 * `readLine` on the way; `done` gets the totals once the upstream's body has ended
 * (whether or not the client stayed to the end).
 */
export function meteredJsonl(body: ReadableStream<Uint8Array>, readLine: (json: any) => BatchLine | undefined, done: (totals: BatchTotals) => Promise<void>): ReadableStream<Uint8Array> {
  const totals = new BatchTotals();
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let partial = "";
  const take = (text: string) => {
    partial += text;
    let nl = partial.indexOf("\n");
    while (nl >= 0) {
      line(partial.slice(0, nl));
      partial = partial.slice(nl + 1);
      nl = partial.indexOf("\n");
    }
  };
  const line = (text: string) => {
    if (!text.trim()) return;
    try {
      totals.add(readLine(JSON.parse(text)));
    } catch {
      // A line that is not JSON (or not a result) bills nothing.
    }
  };
  const finish = async () => {
    line(partial + decoder.decode());
    partial = "";
    await done(totals).catch(() => {});
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { value, done: ended } = await reader.read();
      if (ended) {
        await finish();
        controller.close();
        return;
      }
      take(decoder.decode(value, { stream: true }));
      controller.enqueue(value);
    },
    async cancel() {
      // The client went away: the rest is still counted (see the threat above).
      try {
        for (let r = await reader.read(); !r.done; r = await reader.read()) take(decoder.decode(r.value, { stream: true }));
        await finish();
      } catch {
        reader.releaseLock();
      }
    },
  });
}

/** The body of a results answer, metered on its way (a refusal passes through as it is). */
export function withMeteredBody(res: Response, requestId: string, readLine: (json: any) => BatchLine | undefined, done: (totals: BatchTotals) => Promise<void>): Response {
  if (!res.ok || !res.body) return res;
  // The stream's callbacks outlive the handler: marked with the request's id (Surface.marksDetachedWork).
  enterRequest(requestId);
  return new Response(meteredJsonl(res.body, readLine, done), { status: res.status, headers: res.headers });
}
