import type { Db } from "../db/client";
import { ApiError } from "../http/errors";
import { limitOf } from "./page";
import { eventHeads, eventTexts, TextPump } from "./replay";

const enc = new TextEncoder();

/**
 * The list endpoint's page (`{data, next_page}`, the SDK's PageCursor) as a streamed JSON
 * body: the page's heads decide `next_page` first, then the events are read and written
 * one at a time as the client reads (replay.ts), never joined into one string. `order`
 * asc (default) or desc, `types` filter; the cursor is the last `seq`, opaque to clients.
 */
export async function eventListResponse(
  db: Db,
  sessionId: string,
  q: { limit?: number; page?: string; order?: "asc" | "desc"; types?: string[] },
): Promise<Response> {
  const limit = limitOf(q.limit);
  let cursor: number | undefined;
  if (q.page) {
    const m = /^p([1-9][0-9]{0,15})$/.exec(q.page);
    if (!m) throw new ApiError(400, "invalid page cursor");
    cursor = Number(m[1]);
  }
  const heads = await eventHeads(db, sessionId, { cursor, desc: q.order === "desc", types: q.types, limit: limit + 1 });
  const more = heads.length > limit;
  const page = more ? heads.slice(0, limit) : heads;
  const tail = enc.encode(`],"next_page":${JSON.stringify(more ? `p${page[page.length - 1].seq}` : null)}}`);
  const events = eventTexts(db, sessionId, page);
  let written = 0;
  const pump = new TextPump();
  pump.push(`{"data":[`);
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let piece = pump.next();
      if (!piece) {
        const next = await events.next();
        if (next.done) {
          controller.enqueue(tail);
          controller.close();
          return;
        }
        pump.push(written++ ? "," : "", next.value.json);
        piece = pump.next()!;
      }
      controller.enqueue(piece);
    },
    cancel() {
      void events.return(undefined).catch(() => {});
    },
  });
  return new Response(body, { headers: { "content-type": "application/json" } });
}
