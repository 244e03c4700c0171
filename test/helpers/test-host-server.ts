import { statSync } from "node:fs";
import { join } from "node:path";

/**
 * The servers of the test hosts (test-hosts.ts), run inside the test's network namespace
 * on every address of it: HTTP on 80 and 8080, and TLS on 443 (a throwaway self-signed
 * certificate; clients use -k). Answers:
 *   GET /            "hello from <address>:<port>"
 *   GET /bytes/<n>   n bytes (a download; at most 1 GiB), streamed
 *   GET /host        the Host header it received
 *   GET /<path>      a file of the directory given as second argument, if it has one
 *                    (a directory's index.html): package registries made by a test;
 *                    404 for a missing file under one of its directories (apt probes
 *                    InRelease and Release.gpg, which a flat test repository has not)
 */
const certDir = process.argv[2];
const filesDir = process.argv[3];
const tls = { cert: Bun.file(join(certDir, "cert.pem")), key: Bun.file(join(certDir, "key.pem")) };
const CHUNK = new Uint8Array(1024 * 1024).fill(120);

function handler(port: number) {
  return (req: Request) => {
    const url = new URL(req.url);
    if (filesDir && !url.pathname.includes("..")) {
      const path = join(filesDir, decodeURIComponent(url.pathname));
      for (const candidate of [path, join(path, "index.html")]) if (statSync(candidate, { throwIfNoEntry: false })?.isFile()) return new Response(Bun.file(candidate));
      const top = url.pathname.split("/")[1];
      if (top && statSync(join(filesDir, top), { throwIfNoEntry: false })?.isDirectory()) return new Response("not found", { status: 404 });
    }
    if (url.pathname === "/host") return new Response(req.headers.get("host") ?? "");
    const bytes = /^\/bytes\/(\d+)$/.exec(url.pathname);
    if (bytes) {
      let left = Math.min(Number(bytes[1]), 1024 ** 3);
      const total = left;
      return new Response(
        new ReadableStream({
          pull(c) {
            if (left <= 0) return c.close();
            const n = Math.min(left, CHUNK.length);
            c.enqueue(CHUNK.subarray(0, n));
            left -= n;
          },
        }),
        { headers: { "content-length": String(total) } },
      );
    }
    return new Response(`hello from ${url.hostname}:${port}`);
  };
}

Bun.serve({ hostname: "0.0.0.0", port: 80, fetch: handler(80) });
Bun.serve({ hostname: "0.0.0.0", port: 8080, fetch: handler(8080) });
Bun.serve({ hostname: "0.0.0.0", port: 443, tls, fetch: handler(443) });
console.log("ready");
