// Database-independent: the process-level guard, in a process of its own (bun test reports uncaught errors itself).
import { expect, test } from "bun:test";
import { join } from "node:path";

const root = join(import.meta.dir, "../..");

test("an error thrown outside any handler is logged with its request id and the process goes on", async () => {
  const script = `
    import { enterRequest, installLastResort } from "${root}/src/last-resort";
    import { createLogger } from "${root}/src/log";
    installLastResort(createLogger("error"));
    setTimeout(() => {
      enterRequest("req_test_1");
      // What a request's stream callback did when it wrote to a closed controller.
      setTimeout(() => { throw new Error("Invalid state: Controller is already closed"); }, 1);
    }, 1);
    void Promise.reject(new Error("nobody awaited this"));
    setTimeout(() => { console.log(JSON.stringify({ msg: "still serving" })); process.exit(0); }, 200);
  `;
  const proc = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe", cwd: root });
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  expect(code).toBe(0);
  const lines = out.trim().split("\n").map((l) => JSON.parse(l));
  expect(lines.map((l) => [l.msg.split(" (")[0], l.requestId, l.err?.message])).toEqual([
    ["unhandled promise rejection", undefined, "nobody awaited this"],
    ["uncaught exception", "req_test_1", "Invalid state: Controller is already closed"],
    ["still serving", undefined, undefined],
  ]);
}, 30_000);
