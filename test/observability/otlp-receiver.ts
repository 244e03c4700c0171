/** A span as an OTLP/HTTP JSON export carries it (attributes flattened). */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean>;
  status?: { code?: number; message?: string };
  serviceName?: string;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Content types of the exports received. */
  contentTypes: string[];
  waitFor(predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<void>;
  stop(): void;
}

type AnyValue = { stringValue?: string; intValue?: number | string; doubleValue?: number; boolValue?: boolean };

function valueOf(v: AnyValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return JSON.stringify(v);
}

const attrs = (list: { key: string; value: AnyValue }[] = []) => Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

/** A local OTLP/HTTP collector: decodes the standard JSON encoding of ExportTraceServiceRequest. */
export function startOtlpReceiver(): OtlpReceiver {
  const r: OtlpReceiver = {
    url: "",
    spans: [],
    contentTypes: [],
    async waitFor(predicate, timeoutMs = 15_000) {
      const until = Date.now() + timeoutMs;
      while (!predicate(r.spans)) {
        if (Date.now() > until) throw new Error(`OTLP receiver: condition not met within ${timeoutMs} ms (${r.spans.length} spans: ${r.spans.map((s) => s.name).join(", ")})`);
        await Bun.sleep(50);
      }
    },
    stop: () => server.stop(true),
  };
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      if (req.method !== "POST" || new URL(req.url).pathname !== "/v1/traces") return new Response("not found", { status: 404 });
      r.contentTypes.push(req.headers.get("content-type") ?? "");
      const body = (await req.json()) as { resourceSpans: any[] };
      for (const rs of body.resourceSpans ?? []) {
        const serviceName = attrs(rs.resource?.attributes)["service.name"] as string | undefined;
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            r.spans.push({ traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId || undefined, name: s.name, kind: s.kind, attributes: attrs(s.attributes), status: s.status, serviceName });
          }
        }
      }
      return Response.json({});
    },
  });
  r.url = `http://127.0.0.1:${server.port}`;
  return r;
}
