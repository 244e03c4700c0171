import { connect, type Socket } from "node:net";

/**
 * An SSE request over a plain socket: thousands of them cost the test little (fetch caps
 * its concurrent requests), and what the service sent is kept only as a short tail.
 */
export interface RawStream {
  /** The response's status, once its head arrived. */
  status: number;
  /** The last characters received (head included). */
  tail: string;
  bytes: number;
  socket: Socket;
  /** Resolves when `tail` matches, rejects after `ms`. */
  waitFor(re: RegExp, ms: number): Promise<void>;
  close(): void;
}

export function openRawStream(base: string, path: string, key: string, init: { method?: string; body?: string; accept?: string } = {}): Promise<RawStream> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(u.port), u.hostname);
    const waiters = new Set<() => void>();
    const s: RawStream = {
      status: 0,
      tail: "",
      bytes: 0,
      socket,
      waitFor(re, ms) {
        return new Promise((ok, fail) => {
          const check = () => {
            if (!re.test(s.tail)) return;
            waiters.delete(check);
            clearTimeout(timer);
            ok();
          };
          const timer = setTimeout(() => {
            waiters.delete(check);
            fail(new Error(`not within ${ms} ms: ${re} (tail: ${JSON.stringify(s.tail.slice(-300))})`));
          }, ms);
          waiters.add(check);
          check();
        });
      },
      close: () => socket.destroy(),
    };
    socket.on("error", (e) => (s.status ? undefined : reject(e)));
    socket.on("data", (d: Buffer) => {
      s.bytes += d.length;
      s.tail = (s.tail + d.toString("latin1", Math.max(0, d.length - 4096))).slice(-4096);
      if (!s.status) {
        const m = /^HTTP\/1\.1 (\d{3})/.exec(s.tail);
        if (m && s.tail.includes("\r\n\r\n")) {
          s.status = Number(m[1]);
          resolve(s);
        }
      }
      for (const w of [...waiters]) w();
    });
    socket.on("close", () => {
      if (!s.status) reject(new Error(`connection closed before a response head (${JSON.stringify(s.tail)})`));
    });
    const body = init.body ?? "";
    socket.write(
      `${init.method ?? "GET"} ${path} HTTP/1.1\r\nhost: ${u.host}\r\nauthorization: Bearer ${key}\r\naccept: ${init.accept ?? "text/event-stream"}\r\n` +
        (body ? `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` : "") +
        `\r\n${body}`,
    );
  });
}
