import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuthenticationError, Sandbox } from "e2b";
import { startTestService } from "../helpers/service";
import { requireNetworkTools } from "../helpers/test-hosts";
import { destroyAll, requireBubblewrap } from "../sandboxes/helpers";
import { type E2BContext, sdkOptions } from "./helpers";
import { WS_ECHO } from "../helpers/ws-echo";

// Ports of a sandbox from outside, as E2B serves them: `<port>-<sandboxID>.<domain>` (the
// create answer's `domain`, SANDBOX_DOMAIN) behind a TLS-terminating proxy (socat here, as
// a self-hoster would run Caddy or nginx in front, with wildcard DNS; *.localhost
// resolves to loopback), and the `sandboxUrl` mode's headers. envd, the code interpreter
// and servers of the sandbox, HTTP and WebSocket; traffic tokens; signed file URLs.
let c: E2BContext;
let tlsPort: number;
let terminator: ReturnType<typeof Bun.spawn> | undefined;
let certDir: string;
/** The SDK's options without `sandboxUrl`: it reaches sandboxes by host name, through the TLS proxy. */
let domainOpts: { apiKey: string; apiUrl: string };

const HOST_ECHO = `
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = (self.headers.get("Host") or "").encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`;

beforeAll(async () => {
  requireBubblewrap();
  requireNetworkTools();
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  tlsPort = probe.port;
  probe.stop(true);
  const svc = await startTestService({ SANDBOX_DOMAIN: `localhost:${tlsPort}`, SANDBOX_REAPER_INTERVAL_MS: "100" });
  const org = await svc.org();
  const { key } = await svc.key(org);
  c = { svc, key, org, opts: sdkOptions(svc, key) };
  domainOpts = { apiKey: key, apiUrl: `${svc.url}/e2b` };
  certDir = mkdtempSync(join(tmpdir(), "gw-tls-"));
  const cert = Bun.spawnSync(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,DNS:*.localhost", "-keyout", join(certDir, "key.pem"), "-out", join(certDir, "cert.pem")], { stderr: "pipe" });
  if (cert.exitCode !== 0) throw new Error(`openssl: ${cert.stderr}`);
  terminator = Bun.spawn(["socat", `OPENSSL-LISTEN:${tlsPort},bind=127.0.0.1,reuseaddr,fork,cert=${join(certDir, "cert.pem")},key=${join(certDir, "key.pem")},verify=0`, `TCP:127.0.0.1:${new URL(svc.url).port}`], { stderr: "ignore" });
  // The proxy's certificate is self-signed; this test process trusts it.
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
  for (let i = 0; i < 100 && !(await fetch(`https://localhost:${tlsPort}/healthz`).then((r) => r.ok, () => false)); i++) await Bun.sleep(50);
}, 240_000);

afterAll(async () => {
  terminator?.kill("SIGKILL");
  if (c) {
    await destroyAll(c.svc);
    await c.svc.close();
  }
  if (certDir) rmSync(certDir, { recursive: true, force: true });
});

/** Starts a server in the sandbox in the background and waits until its port answers. */
async function serve(sbx: Sandbox, cmd: string, port: number): Promise<void> {
  await sbx.commands.run(cmd, { background: true });
  // curl exits 7 while nothing accepts on the port.
  const r = await sbx.commands.run(`for i in $(seq 1 200); do curl -s -o /dev/null -m 1 http://127.0.0.1:${port}/; [ $? -ne 7 ] && exit 0; sleep 0.05; done; exit 1`).catch((e) => e);
  expect(r.exitCode).toBe(0);
}

async function wsEcho(url: string, headers: Record<string, string> = {}): Promise<string> {
  const ws = new WebSocket(url, { headers } as never);
  return new Promise((resolve, reject) => {
    ws.onopen = () => ws.send("ping");
    ws.onmessage = (e) => {
      resolve(String(e.data));
      ws.close();
    };
    ws.onerror = () => reject(new Error(`WebSocket to ${url} failed`));
    setTimeout(() => reject(new Error("no echo within 10 s")), 10_000);
  });
}

describe("domain mode: the SDK with `domain` alone (no sandboxUrl)", () => {
  test("envd and files work through `49983-<id>.<domain>`; getHost(8000) serves a Python http.server, HTTP and WebSocket", async () => {
    const sbx = await Sandbox.create("base", domainOpts);
    expect(sbx.sandboxDomain).toBe(`localhost:${tlsPort}`);
    expect(sbx.getHost(8000)).toBe(`8000-${sbx.sandboxId}.localhost:${tlsPort}`);
    expect((await sbx.commands.run("echo hi")).stdout).toBe("hi\n");
    await sbx.files.write("/home/user/index.txt", "served from the sandbox");
    expect(await sbx.files.read("/home/user/index.txt")).toBe("served from the sandbox");
    await sbx.commands.run("head -c 3000000 /dev/zero > /home/user/big.bin");
    await serve(sbx, "cd /home/user && python3 -m http.server 8000 --bind 127.0.0.1", 8000);
    const res = await fetch(`https://${sbx.getHost(8000)}/index.txt`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("served from the sandbox");
    // A body larger than any buffer on the way, streamed through.
    expect((await (await fetch(`https://${sbx.getHost(8000)}/big.bin`)).arrayBuffer()).byteLength).toBe(3_000_000);
    await sbx.files.write("/home/user/ws.py", WS_ECHO);
    await serve(sbx, "python3 /home/user/ws.py 8765", 8765);
    expect(await wsEcho(`wss://${sbx.getHost(8765)}/chat`)).toBe("echo: ping");
    await sbx.kill();
  });

  test("the code interpreter answers through `49999-<id>.<domain>`", async () => {
    const { Sandbox: Interpreter } = await import("@e2b/code-interpreter");
    const sbx = await Interpreter.create("code_interpreter", domainOpts);
    const exec = await sbx.runCode("21 * 2");
    expect(exec.text).toBe("42");
    await sbx.kill();
  });

  test("a sandbox that is gone answers 502 as E2B's proxy does; a port nothing listens on, 502", async () => {
    const sbx = await Sandbox.create("base", domainOpts);
    const closed = await fetch(`https://${sbx.getHost(3999)}/`);
    expect(closed.status).toBe(502);
    expect(await closed.json()).toMatchObject({ code: 502, message: "The sandbox is running but port 3999 is not open" });
    await sbx.kill();
    const gone = await fetch(`https://${sbx.getHost(3000)}/`);
    expect(gone.status).toBe(502);
    expect(await gone.json()).toEqual({ code: 502, message: "The sandbox was not found", sandboxId: sbx.sandboxId });
  });
});

describe("sandboxUrl mode: E2b-Sandbox-Id and E2b-Sandbox-Port headers", () => {
  test("the same servers answer, HTTP and WebSocket", async () => {
    const sbx = await Sandbox.create("base", c.opts);
    await sbx.files.write("/home/user/index.txt", "by header");
    await serve(sbx, "cd /home/user && python3 -m http.server 8000 --bind 127.0.0.1", 8000);
    const headers = { "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "8000" };
    const res = await fetch(`${c.svc.url}/e2b/sandbox/index.txt`, { headers });
    expect(await res.text()).toBe("by header");
    await sbx.files.write("/home/user/ws.py", WS_ECHO);
    await serve(sbx, "python3 /home/user/ws.py 8765", 8765);
    expect(await wsEcho(`${c.svc.url.replace("http", "ws")}/e2b/sandbox/chat`, { "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "8765" })).toBe("echo: ping");
    await sbx.kill();
  });
});

describe("traffic access tokens (allowPublicTraffic: false)", () => {
  test("without the token 403, with it 200; the traffic token does not open envd", async () => {
    const sbx = await Sandbox.create("base", { ...domainOpts, network: { allowPublicTraffic: false } });
    expect(sbx.trafficAccessToken).toBeTruthy();
    await sbx.files.write("/home/user/index.txt", "private");
    await serve(sbx, "cd /home/user && python3 -m http.server 8000 --bind 127.0.0.1", 8000);
    const url = `https://${sbx.getHost(8000)}/index.txt`;
    expect((await fetch(url)).status).toBe(403);
    expect((await fetch(url, { headers: { "e2b-traffic-access-token": "forged" } })).status).toBe(403);
    const ok = await fetch(url, { headers: { "e2b-traffic-access-token": sbx.trafficAccessToken! } });
    expect([ok.status, await ok.text()]).toEqual([200, "private"]);
    // The same request by header, in sandboxUrl mode.
    const byHeader = await fetch(`${c.svc.url}/e2b/sandbox/index.txt`, { headers: { "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "8000" } });
    expect(byHeader.status).toBe(403);
    // envd wants its own token: the traffic token is refused there.
    const asTraffic = new Sandbox({ ...c.opts, sandboxId: sbx.sandboxId, envdVersion: "0.5.7", envdAccessToken: sbx.trafficAccessToken } as never);
    expect(await asTraffic.commands.run("echo no").catch((e) => e)).toBeInstanceOf(AuthenticationError);
    // A public sandbox's ports answer without any token.
    const open = await Sandbox.create("base", domainOpts);
    await serve(open, "cd /home/user && python3 -m http.server 8000 --bind 127.0.0.1", 8000);
    expect((await fetch(`https://${open.getHost(8000)}/`)).status).toBe(200);
    await open.kill();
    await sbx.kill();
  });

  test("maskRequestHost: the sandbox's server sees that Host, with ${PORT} filled in", async () => {
    const sbx = await Sandbox.create("base", { ...domainOpts, network: { maskRequestHost: "custom-host.example.com:${PORT}" } });
    await sbx.files.write("/home/user/host.py", HOST_ECHO);
    await serve(sbx, "python3 /home/user/host.py 8000", 8000);
    expect(await (await fetch(`https://${sbx.getHost(8000)}/`)).text()).toBe("custom-host.example.com:8000");
    await sbx.kill();
  });
});

describe("signed file URLs (E2B's secure signing, with expiry)", () => {
  for (const mode of ["domain", "sandboxUrl"] as const) {
    test(`${mode} mode: valid, expired and tampered signatures; an upload`, async () => {
      const sbx = await Sandbox.create("base", mode === "domain" ? domainOpts : c.opts);
      await sbx.files.write("/home/user/report.txt", "signed content");
      const plain = await sbx.downloadUrl("report.txt");
      expect(new URL(plain).searchParams.get("signature")).toStartWith("v1_");
      expect(await (await fetch(plain)).text()).toBe("signed content");
      const expiring = await sbx.downloadUrl("report.txt", { useSignatureExpiration: 60 });
      expect(await (await fetch(expiring)).text()).toBe("signed content");
      const expired = await sbx.downloadUrl("report.txt", { useSignatureExpiration: -5 });
      expect((await fetch(expired)).status).toBe(401);
      const tampered = new URL(plain);
      const sig = tampered.searchParams.get("signature")!;
      tampered.searchParams.set("signature", sig.slice(0, -1) + (sig.endsWith("A") ? "B" : "A"));
      expect((await fetch(tampered)).status).toBe(401);
      const otherPath = new URL(plain);
      otherPath.searchParams.set("path", "/etc/passwd");
      expect((await fetch(otherPath)).status).toBe(401);
      // A read signature does not upload.
      expect((await fetch(plain, { method: "POST", body: "x" })).status).toBe(401);
      const upload = await sbx.uploadUrl("uploaded.txt", { useSignatureExpiration: 60 });
      const form = new FormData();
      form.append("file", new Blob(["sent by URL"]), "uploaded.txt");
      expect((await fetch(upload, { method: "POST", body: form })).status).toBe(200);
      expect(await sbx.files.read("/home/user/uploaded.txt")).toBe("sent by URL");
      await sbx.kill();
      // The sandbox is gone: its URLs open nothing.
      expect((await fetch(plain)).status).toBe(401);
    });
  }
});
