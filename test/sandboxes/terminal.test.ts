import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestService, type TestService } from "../helpers/service";

// The terminal WebSocket of a real local sandbox: a ticket from the ordinary API, then a
// shell on a pseudo-terminal; the ticket opens that sandbox only.
let svc: TestService;
let key: string;
let otherKey: string;
let sandboxId: string;
let otherSandbox: string;

async function api(method: string, path: string, k = key, body?: unknown) {
  const res = await svc.fetch(path, { method, headers: { authorization: `Bearer ${k}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

beforeAll(async () => {
  if (!Bun.which("bwrap")) throw new Error("bwrap not found: install the Debian package 'bubblewrap'");
  svc = await startTestService();
  key = (await svc.key(await svc.org())).key;
  otherKey = (await svc.key(await svc.org())).key;
  sandboxId = (await api("POST", "/sandboxes", key, { templateID: "base" })).body.sandboxID;
  otherSandbox = (await api("POST", "/sandboxes", otherKey, { templateID: "base" })).body.sandboxID;
}, 120_000);
afterAll(async () => {
  await svc?.close();
});

const socketUrl = (id: string, ticket: string) => `${svc.url.replace(/^http/, "ws")}/ws/sandboxes/${id}/terminal?ticket=${encodeURIComponent(ticket)}`;

/** Opens the socket and collects its output (text of the binary messages) and its controls. */
function open(url: string) {
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  const got = { output: "", controls: [] as any[], closed: undefined as undefined | { code: number; reason: string } };
  ws.onmessage = (e) => {
    if (typeof e.data === "string") got.controls.push(JSON.parse(e.data));
    else got.output += new TextDecoder().decode(e.data as ArrayBuffer);
  };
  const closed = new Promise<void>((r) => (ws.onclose = (e) => ((got.closed = { code: e.code, reason: e.reason }), r())));
  return { ws, got, closed };
}

async function waitFor(f: () => boolean, what: string) {
  for (let i = 0; i < 300 && !f(); i++) await Bun.sleep(50);
  if (!f()) throw new Error(`timed out waiting for ${what}`);
}

test("a shell runs echo on a pseudo-terminal and reports its exit", async () => {
  const t = await api("POST", `/sandboxes/${sandboxId}/terminal/tickets`);
  expect(t.status).toBe(201);
  expect(t.body.ticket).toMatch(/^\d{13}\.[A-Za-z0-9_-]{43}$/);
  const { ws, got, closed } = open(socketUrl(sandboxId, t.body.ticket));
  await new Promise((r) => (ws.onopen = r));
  ws.send(JSON.stringify({ type: "resize", cols: 80, rows: 24 }));
  ws.send(JSON.stringify({ type: "input", data: "echo term-$((6*7)); tty\r" }));
  await waitFor(() => got.output.includes("term-42"), "echo's output");
  await waitFor(() => /\/dev\/pts\/\d+/.test(got.output), "tty's answer");
  ws.send(JSON.stringify({ type: "input", data: "exit 3\r" }));
  await closed;
  expect(got.controls).toEqual([{ type: "exit", exitCode: 3 }]);
  expect(got.closed?.code).toBe(1000);
}, 60_000);

test("no ticket, a forged one, or one of another sandbox is refused; bad messages close the socket", async () => {
  const plain = await svc.fetch(`/ws/sandboxes/${sandboxId}/terminal`);
  expect(plain.status).toBe(426);
  for (const ticket of ["", "1.2", `${Date.now() + 60_000}.${"A".repeat(43)}`]) {
    const { got, closed } = open(socketUrl(sandboxId, ticket));
    await closed;
    expect(got.output).toBe("");
    expect(got.closed?.code).not.toBe(1000);
  }
  // A ticket of this organization's sandbox does not open another organization's.
  const mine = (await api("POST", `/sandboxes/${sandboxId}/terminal/tickets`)).body.ticket;
  const res = await fetch(`${svc.url}/ws/sandboxes/${otherSandbox}/terminal?ticket=${mine}`, { headers: { upgrade: "websocket", connection: "upgrade", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-version": "13" } });
  expect(res.status).toBe(401);
  expect((await res.json()).message).toContain("terminal ticket");
  // Another organization cannot get a ticket for it either.
  expect((await api("POST", `/sandboxes/${sandboxId}/terminal/tickets`, otherKey)).status).toBe(404);
  const { ws, got, closed } = open(socketUrl(sandboxId, mine));
  await new Promise((r) => (ws.onopen = r));
  ws.send("not json");
  await closed;
  expect(got.closed?.code).toBe(1003);
  // Each ticket opens one shell.
  const again = await fetch(`${svc.url}/ws/sandboxes/${sandboxId}/terminal?ticket=${mine}`, { headers: { upgrade: "websocket", connection: "upgrade", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-version": "13" } });
  expect(again.status).toBe(401);
  expect((await again.json()).message).toContain("already used");
}, 60_000);

test("a stopped sandbox gets no ticket", async () => {
  await api("DELETE", `/sandboxes/${otherSandbox}`, otherKey);
  expect((await api("POST", `/sandboxes/${otherSandbox}/terminal/tickets`, otherKey)).status).toBe(409);
});
