/** A real HTTP receiver on 127.0.0.1 that records exactly what arrives. */
export interface Received {
  at: number;
  method: string;
  path: string;
  headers: Record<string, string>;
  raw: Uint8Array;
}

export type Behaviour = (req: Received, nth: number) => Response | Promise<Response> | "hang";

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  behaviour: Behaviour;
  /** Requests being handled right now, and the most there ever were at once. */
  inFlight: number;
  maxInFlight: number;
  /** Resolves when `predicate` holds for the received list. */
  waitFor(predicate: (r: Received[]) => boolean, timeoutMs?: number): Promise<void>;
  stop(): void;
}

export function startReceiver(behaviour: Behaviour = () => new Response("ok")): Receiver {
  const waiters = new Set<() => void>();
  const hanging: (() => void)[] = [];
  const r: Receiver = {
    url: "",
    port: 0,
    received: [],
    behaviour,
    inFlight: 0,
    maxInFlight: 0,
    async waitFor(predicate, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(r.received)) {
        if (Date.now() > deadline) throw new Error(`receiver: condition not met within ${timeoutMs} ms (${r.received.length} requests received)`);
        await new Promise<void>((res) => {
          const done = () => {
            waiters.delete(done);
            res();
          };
          waiters.add(done);
          setTimeout(done, 100);
        });
      }
    },
    stop() {
      for (const h of hanging.splice(0)) h();
      server.stop(true);
    },
  };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 60,
    async fetch(req) {
      r.inFlight++;
      r.maxInFlight = Math.max(r.maxInFlight, r.inFlight);
      let open = true;
      const close = () => {
        if (open) r.inFlight--;
        open = false;
      };
      req.signal.addEventListener("abort", close);
      try {
        return await handle(req);
      } finally {
        close();
      }
    },
  });
  async function handle(req: Request): Promise<Response> {
      const raw = new Uint8Array(await req.arrayBuffer());
      const rec: Received = { at: Date.now(), method: req.method, path: new URL(req.url).pathname, headers: Object.fromEntries(req.headers), raw };
      r.received.push(rec);
      for (const w of [...waiters]) w();
      const out = await r.behaviour(rec, r.received.length);
      if (out === "hang") return new Promise<Response>((res) => hanging.push(() => res(new Response("late"))));
      return out;
  }
  r.port = server.port!;
  r.url = `http://127.0.0.1:${server.port}`;
  return r;
}
