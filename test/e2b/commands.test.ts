import { afterAll, beforeAll, expect, test } from "bun:test";
import { AuthenticationError, CommandExitError, Sandbox } from "e2b";
import { type E2BContext, startE2B, stopE2B } from "./helpers";

// envd's process service through the official SDK: real processes in a real sandbox.
let c: E2BContext;
let sbx: Sandbox;

beforeAll(async () => {
  c = await startE2B();
  sbx = await Sandbox.create("base", c.opts);
}, 240_000);

afterAll(() => stopE2B(c));

test("foreground command with envs and cwd", async () => {
  expect(await sbx.commands.run("echo hi")).toMatchObject({ exitCode: 0, stdout: "hi\n", stderr: "" });
  await sbx.files.makeDir("/home/user/work");
  const r = await sbx.commands.run('echo "$A $B"; pwd; echo err >&2', { envs: { A: "one", B: "two" }, cwd: "/home/user/work" });
  expect(r).toMatchObject({ exitCode: 0, stdout: "one two\n/home/user/work\n", stderr: "err\n" });
});

test("a non-zero exit raises the SDK's CommandExitError with the output", async () => {
  const err = await sbx.commands.run("echo out; echo bad >&2; exit 3").catch((e) => e);
  expect(err).toBeInstanceOf(CommandExitError);
  expect(err).toMatchObject({ exitCode: 3, stdout: "out\n", stderr: "bad\n" });
});

test("background command: output streamed as it happens, stdin, kill", async () => {
  const lines: string[] = [];
  let gotFirst: () => void = () => {};
  const first = new Promise<void>((r) => (gotFirst = r));
  const h = await sbx.commands.run('while read line; do echo "got $line"; done', {
    background: true,
    stdin: true,
    onStdout: (d) => {
      lines.push(d);
      gotFirst();
    },
  });
  await sbx.commands.sendStdin(h.pid, "one\n");
  // The first line arrives while the command still runs.
  await first;
  expect(lines.join("")).toBe("got one\n");
  expect((await sbx.commands.list()).map((p) => p.pid)).toContain(h.pid);
  await sbx.commands.sendStdin(h.pid, "two\n");
  await waitFor(() => lines.join("") === "got one\ngot two\n");
  expect(await h.kill()).toBe(true);
  const err = await h.wait().catch((e) => e);
  expect(err).toBeInstanceOf(CommandExitError);
  expect((await sbx.commands.list()).map((p) => p.pid)).not.toContain(h.pid);
  // Killing what is gone: false, as envd's not-found.
  expect(await sbx.commands.kill(h.pid)).toBe(false);
});

test("connect to a running background command", async () => {
  const h = await sbx.commands.run("sleep 0.5; echo late", { background: true });
  await h.disconnect();
  const again = await sbx.commands.connect(h.pid);
  expect((await again.wait()).stdout).toBe("late\n");
});

test("output nobody watches is read only up to a cap; the writer then waits for a reader", async () => {
  const h = await sbx.commands.run("head -c 20000000 /dev/zero; echo done", { background: true });
  await h.disconnect();
  // The writer ends up blocked writing to its full stdout (a pipe or socket pair; it
  // would have finished long since if the service kept reading and dropping).
  await waitFor(async () => /^(pipe_write|sock_alloc_send_pskb|unix_stream_sendmsg)$/.test((await sbx.commands.run("cat /proc/$(pgrep -x head)/wchan 2>/dev/null; true")).stdout.trim()), 30_000);
  // A reader attaching lets it finish.
  const again = await sbx.commands.connect(h.pid);
  const r = await again.wait();
  expect(r.exitCode).toBe(0);
  expect(r.stdout.endsWith("done\n")).toBe(true);
}, 60_000);

test("pty: a real terminal with input and resize", async () => {
  let out = "";
  const dec = new TextDecoder();
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => void (out += dec.decode(d)) });
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode("tty; stty size\n"));
  await waitFor(() => /\/dev\/pts\/\d+/.test(out) && out.includes("24 80"));
  await sbx.pty.resize(pty.pid, { cols: 100, rows: 40 });
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode("stty size; exit\n"));
  await waitFor(() => out.includes("40 100"));
  expect((await pty.wait()).exitCode).toBe(0);
});

test("a wrong access token is the SDK's AuthenticationError", async () => {
  const res = await c.svc.fetch("/e2b/sandbox/process.Process/List", { method: "POST", headers: { "content-type": "application/json", "e2b-sandbox-id": sbx.sandboxId, "x-access-token": "forged" }, body: "{}" });
  expect(res.status).toBe(401);
  expect(((await res.json()) as { code: string }).code).toBe("unauthenticated");
  // The SDK's own client, built with a wrong token.
  const wrong = new Sandbox({ sandboxId: sbx.sandboxId, envdVersion: "0.5.7", envdAccessToken: "forged", ...c.opts } as never);
  await expect(wrong.commands.run("echo hi")).rejects.toBeInstanceOf(AuthenticationError);
  await expect(wrong.files.read("/etc/hostname")).rejects.toBeInstanceOf(AuthenticationError);
});

async function waitFor(fn: () => boolean | Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await Bun.sleep(20);
  }
}
