// Child process for bench/events.ts: LIVE receivers answering 200 at once and DEAD
// receivers that accept connections and never answer. Records the arrival time of each
// event id (wall clock, sub-millisecond) and serves them on a control port.
const live = Number(process.env.LIVE ?? 9);
const dead = Number(process.env.DEAD ?? 1);
const now = () => performance.timeOrigin + performance.now();
const arrivals: [string, number][][] = [];
const urls: string[] = [];
for (let i = 0; i < live; i++) {
  const log: [string, number][] = [];
  arrivals.push(log);
  const s = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      await req.arrayBuffer();
      log.push([req.headers.get("x-event-id") ?? "", now()]);
      return new Response("ok");
    },
  });
  urls.push(`http://127.0.0.1:${s.port}/hook`);
}
for (let i = 0; i < dead; i++) {
  const s = Bun.serve({ hostname: "127.0.0.1", port: 0, idleTimeout: 0, fetch: () => new Promise<Response>(() => {}) });
  urls.push(`http://127.0.0.1:${s.port}/dead`);
}
const control = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    const path = new URL(req.url).pathname;
    if (path === "/count") return Response.json(arrivals.map((a) => a.length));
    return Response.json(arrivals);
  },
});
console.error(`READY http://127.0.0.1:${control.port} ${urls.join(",")}`);
