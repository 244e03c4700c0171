// Database-independent: the console's workload pages in a browser; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import type { Browser, Page } from "puppeteer-core";
import { consolePage } from "./browser";
import { modelEnv, requireBubblewrap, sdk, startModel } from "../agents/helpers";
import { type Receiver, startReceiver } from "../events/receiver";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";
import { accessibilityProblems } from "./a11y";

// Functions passed to page.evaluate run in the browser; these name its globals for the type checker.
declare const document: any;
type HTMLInputElement = { value: string };

// The console's workload pages (sandboxes, sessions, webhooks, agents, endpoints and
// deployments, skills and templates) in a real headless Chromium, signed in with an
// organization key, against a real local sandbox, a mock model upstream and a webhook
// receiver on loopback. Every request to anything but the service is refused and recorded.
const ARTIFACTS = join(import.meta.dir, "..", "..", "test-artifacts", "console");
const SIZES = [
  { name: "desktop", width: 1440, height: 900 },
  { name: "phone", width: 390, height: 844 },
];

let mock: LLMock;
let svc: TestService;
let browser: Browser;
let page: Page;
let key: string;
let orgId: string;
let followedSession: string;
let client: Anthropic;
let receiver: Receiver;
let scratch: string;
let releaseTurn: () => void = () => {};
const turnReleased = new Promise<void>((r) => (releaseTurn = r));
let refused: string[] = [];
const dialogs: string[] = [];
const a11y: Record<string, string[]> = {};

beforeAll(async () => {
  requireBubblewrap();
  mkdirSync(ARTIFACTS, { recursive: true });
  scratch = mkdtempSync(join(tmpdir(), "console-workloads-"));
  mock = await startModel();
  // The turn the console follows: a bash call, then an answer held back until the test lets it go.
  mock.on({ userMessage: "check the sandbox", hasToolResult: false }, { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "echo tool-said-$((20+22))" }) }] } as never);
  mock.on({ userMessage: "check the sandbox", hasToolResult: true }, (async () => {
    await turnReleased;
    return { content: "The sandbox answered 42." };
  }) as never);
  svc = await startTestService(modelEnv(mock));
  orgId = await svc.org("workloads");
  key = (await svc.key(orgId)).key;
  client = sdk(svc, key);
  receiver = startReceiver();
  ({ browser, page, refused } = await consolePage(svc.url, { width: 1440, height: 900 }));
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    void d.accept();
  });
  await signIn(key);
}, 300_000);

async function signIn(token: string) {
  await page.goto(`${svc.url}/console`, { waitUntil: "domcontentloaded" });
  await page.waitForSelector("#token");
  await page.type("#token", token);
  await page.keyboard.press("Enter");
  await page.waitForSelector("nav");
}

afterAll(async () => {
  releaseTurn();
  await browser?.close();
  await svc?.close();
  await mock?.stop();
  receiver?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

const api = async (method: string, path: string, body?: unknown) => {
  const res = await svc.fetch(path, { method, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.status === 204 ? undefined : res.json();
};
const text = (): Promise<string> => page.evaluate(() => document.body.innerText);
const waitForText = (s: string, timeout = 20_000) => page.waitForFunction((t: string) => document.body.innerText.includes(t), { timeout }, s);
const inside = (selector: string) => page.$eval(selector, (el: any) => el.innerText as string);

/** Clicks the element once it is there: lists load again after each change. */
async function press(selector: string) {
  await page.waitForSelector(selector);
  await page.click(selector);
}

async function openPage(id: string, heading: string) {
  await page.click(`nav a[href="#/${id}"]`);
  await page.waitForFunction((h: string) => document.querySelector("main h1")?.textContent === h, {}, heading);
}

/** Screenshots at both sizes and the accessibility check of what is on screen now. */
async function capture(name: string) {
  for (const size of SIZES) {
    await page.setViewport({ width: size.width, height: size.height });
    // Nothing wider than the window: wide tables scroll inside their own box.
    const wide = await page.evaluate((w: number) => (document.documentElement.scrollWidth > w ? [...document.querySelectorAll("body *")].filter((el: any) => el.getBoundingClientRect().right > w + 1 && !el.closest(".scroll")).map((el: any) => `${el.tagName}.${el.className}`).slice(0, 5).concat(`page ${document.documentElement.scrollWidth} px wide`) : []), size.width);
    expect(wide, `${name} at ${size.width}`).toEqual([]);
    await page.screenshot({ path: join(ARTIFACTS, `${name}-${size.width}x${size.height}.png`), fullPage: true });
  }
  await page.setViewport({ width: 1440, height: 900 });
  // In both themes: the workload pages' own colours must hold in the dark one too.
  a11y[name] = [];
  for (const theme of ["light", "dark"]) {
    await page.evaluate((t: string) => (document.documentElement.dataset.theme = t), theme);
    a11y[name].push(...(await accessibilityProblems(page)).map((p) => `(${theme}) ${p}`));
  }
  await page.evaluate(() => delete document.documentElement.dataset.theme);
}

test("sandboxes: live CPU and memory, a readable inspect view, a terminal running echo, and files", async () => {
  const sb = (await api("POST", "/sandboxes", { templateID: "base", metadata: { purpose: "console" } })) as { sandboxID: string };
  // Another organization's sandbox, which the key must not see.
  const other = (await svc.key(await svc.org("elsewhere"))).key;
  const theirs = (await (await svc.fetch("/sandboxes", { method: "POST", headers: { authorization: `Bearer ${other}`, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base" }) })).json()) as { sandboxID: string };
  await openPage("sandboxes", "Sandboxes");
  await waitForText(sb.sandboxID);
  expect(await text()).not.toContain(theirs.sandboxID);
  // Live use: the meters fill in from the metrics API without a click.
  await page.waitForFunction(() => document.querySelector("meter[aria-label='CPU use']") && document.body.innerText.includes(" of "), { timeout: 20_000 });
  await press(`button[aria-label="Inspect ${sb.sandboxID}"]`);
  await page.waitForSelector("dl.fields");
  const fields = await inside("dl.fields");
  expect(fields).toContain("Template ID");
  expect(fields).toContain("Purpose");
  expect(fields).not.toContain("{");

  // The terminal: a real shell in the sandbox over the WebSocket.
  await press("xpath/.//button[text()='Open a terminal']");
  await page.waitForSelector("#terminal-command");
  await page.waitForFunction(() => (document.querySelector("pre.terminal")?.textContent ?? "").length > 0, { timeout: 20_000 });
  await page.type("#terminal-command", "echo console-$((40+2)) > made-here.txt; cat made-here.txt");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => /\nconsole-42/.test(document.querySelector("pre.terminal")?.textContent ?? ""), { timeout: 20_000 });
  // The typed command is echoed by the terminal, the output is on a line of its own.
  expect(await inside("pre.terminal")).toContain("echo console-$((40+2))");
  // Keys typed into the terminal itself go to the shell: a command, then the shell's history (arrow up).
  await press("xpath/.//button[text()='Type in the terminal']");
  await page.waitForFunction(() => document.activeElement?.matches("pre.terminal.direct"));
  await page.keyboard.type("echo direct-$((1+1))");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => /\ndirect-2/.test(document.querySelector("pre.terminal")?.textContent ?? ""), { timeout: 20_000 });
  await page.keyboard.press("ArrowUp");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => (document.querySelector("pre.terminal")?.textContent?.match(/\ndirect-2/g) ?? []).length === 2, { timeout: 20_000 });

  // Files: the one the shell made, an upload, opening both.
  await page.waitForFunction(() => document.body.innerText.includes("Contents of /home/user"));
  await press("xpath/.//button[text()='Refresh the files']");
  await press('button[aria-label="Open made-here.txt"]');
  await page.waitForFunction(() => document.querySelector("pre.file")?.textContent === "console-42\n");
  const local = join(scratch, "notes.txt");
  writeFileSync(local, "uploaded from the console\n");
  const input = await page.$("#upload-file");
  await (input as any).uploadFile(local);
  await press("form[aria-label='Upload a file'] button[type=submit]");
  await waitForText("Uploaded /home/user/notes.txt.");
  const read = (await api("GET", `/sandboxes/${sb.sandboxID}/filesystem?path=/home/user/notes.txt`)) as { content: string };
  expect(Buffer.from(read.content, "base64").toString()).toBe("uploaded from the console\n");
  await press('button[aria-label="Download notes.txt"]');
  await waitForText("Downloaded notes.txt.");
  await capture("sandboxes");
  await press("xpath/.//button[text()='Close the terminal']");
  await page.waitForSelector("xpath/.//button[text()='Reconnect']");
}, 120_000);

test("a session's conversation follows its running turn live: message, tool call, result, then the answer", async () => {
  const agent = await client.beta.agents.create({ name: "checker", model: "claude-sonnet-4-5", tools: [{ type: "agent_toolset_20260401" }] });
  const env = await client.beta.environments.create({ name: "console-env" });
  const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, title: "Console follow" });
  followedSession = session.id;
  await openPage("sessions", "Agent sessions");
  await waitForText(session.id);
  await press(`button[aria-label="Open the conversation of ${session.id}"]`);
  await waitForText("Following live");
  // The message is sent from the console; the turn runs while the page watches.
  await page.type("#session-message", "check the sandbox");
  await press("form[aria-label='Send a message'] button[type=submit]");
  await page.waitForFunction(() => document.querySelector("ol.conversation li.msg.user")?.textContent?.includes("check the sandbox"));
  await page.waitForFunction(() => document.querySelector("ol.conversation li.tool pre")?.textContent?.includes("echo tool-said-$((20+22))"), { timeout: 30_000 });
  await page.waitForFunction(() => document.querySelector("ol.conversation li.tool.result pre")?.textContent?.includes("tool-said-42"), { timeout: 30_000 });
  // Mid-turn: running, no answer yet.
  expect(await inside("section[aria-labelledby='session-title'] .badge")).toBe("running");
  expect(await inside("ol.conversation")).not.toContain("The sandbox answered 42.");
  expect(await inside("ol.conversation li.tool.result")).toContain("Tool result of bash");
  await capture("session-running");
  releaseTurn();
  await page.waitForFunction(() => document.querySelector("ol.conversation li.msg.agent")?.textContent?.includes("The sandbox answered 42."), { timeout: 30_000 });
  await page.waitForFunction(() => document.querySelector("section[aria-labelledby='session-title'] .badge")?.textContent === "idle");
  const items = await page.$$eval("ol.conversation > li", (lis: any[]) => lis.map((li) => li.className));
  expect(items).toEqual(["msg user", "status", "tool", "tool result ", "msg agent", "status"]);
  expect(await inside("ol.conversation")).toContain("Idle (end turn)");
  await capture("sessions");
}, 120_000);

test("create a webhook (secret shown once), send it a test event, edit it and redeliver", async () => {
  await openPage("webhooks", "Webhooks");
  await waitForText("No webhooks.");
  await press("details.panel summary");
  await page.type("#wh-name", "loopback receiver");
  await page.type("#wh-url", receiver.url);
  await press("form[aria-label='Create the webhook'] button[type=submit]");
  await page.waitForSelector("#new-secret");
  const secret = await page.$eval("#new-secret", (el) => (el as unknown as HTMLInputElement).value);
  expect(secret).toMatch(/^whsec_/);
  await press(".secret button");
  await page.waitForFunction(() => !document.querySelector("#new-secret"));
  expect(await page.content()).not.toContain(secret);

  await press('button[aria-label="Deliveries of loopback receiver"]');
  await press("xpath/.//button[text()='Send a test event']");
  await receiver.waitFor((r) => r.length === 1);
  const first = receiver.received[0];
  expect(JSON.parse(new TextDecoder().decode(first.raw)).type).toBe("webhook.test");
  // Signed with the secret shown at creation.
  expect(first.headers["x-signature"]).toBe(createHmac("sha256", secret).update(first.raw).digest("hex"));
  await page.waitForFunction(() => [...document.querySelectorAll("section[aria-labelledby='deliveries-title'] .badge")].some((b: any) => b.textContent === "succeeded"), { timeout: 20_000 });

  // Edit: a new name, only session events.
  await press('button[aria-label="Edit loopback receiver"]');
  await page.waitForSelector("form[aria-label='Save the webhook']");
  await page.$eval("#wh-name", (el) => ((el as unknown as HTMLInputElement).value = ""));
  await page.type("#wh-name", "renamed receiver");
  await press("form[aria-label='Save the webhook'] button[type=submit]");
  await waitForText("Webhook renamed receiver saved.");
  const [hook] = (await api("GET", "/events/webhooks")) as { name: string; events: string[] }[];
  expect(hook.name).toBe("renamed receiver");

  await press('button[aria-label="Deliveries of renamed receiver"]');
  await page.waitForSelector("button[aria-label^='Redeliver dlv_']");
  await press("button[aria-label^='Redeliver dlv_']");
  await receiver.waitFor((r) => r.length === 2);
  expect(JSON.parse(new TextDecoder().decode(receiver.received[1].raw)).id).toBe(JSON.parse(new TextDecoder().decode(first.raw)).id);
  await page.waitForFunction(() => document.querySelectorAll("section[aria-labelledby='deliveries-title'] tbody tr").length === 2, { timeout: 20_000 });
  await page.waitForFunction(() => [...document.querySelectorAll("section[aria-labelledby='deliveries-title'] .badge")].every((b: any) => b.textContent === "succeeded"), { timeout: 20_000 });
  await capture("webhooks");
}, 120_000);

test("agents with versions, environments, endpoints, deployments with runs, skills and templates", async () => {
  await openPage("agents", "Agents and environments");
  await press("xpath/.//summary[text()='Create an agent']");
  await page.type("#agent-name", "made-in-console");
  await page.type("#agent-model", "claude-sonnet-4-5");
  await press("form[aria-label='Create an agent'] button[type=submit]");
  await waitForText("Agent made-in-console created.");
  await press('button[aria-label="Details of made-in-console"]');
  await page.waitForFunction(() => document.body.innerText.includes("Versions of made-in-console"));
  await waitForText("console-env");
  await capture("agents");

  const agents = (await api("GET", "/v1/agents")) as { data: { id: string; name: string }[] };
  const agent = agents.data.find((a) => a.name === "made-in-console")!;
  const envs = (await api("GET", "/v1/environments")) as { data: { id: string }[] };
  await api("POST", "/v1/endpoints", { name: "console-endpoint", agent: agent.id, environment_id: envs.data[0].id });
  const deployment = (await api("POST", "/v1/deployments", { name: "nightly", agent: agent.id, environment_id: envs.data[0].id, initial_events: [{ type: "user.message", content: [{ type: "text", text: "hello" }] }], schedule: { type: "cron", expression: "0 3 * * *", timezone: "UTC" } })) as { id: string };
  const run = (await api("POST", `/v1/deployments/${deployment.id}/run`)) as { id: string };
  await openPage("automation", "Endpoints and deployments");
  await waitForText("console-endpoint");
  await waitForText("0 3 * * * (UTC)");
  await press('button[aria-label="Details of nightly"]');
  await waitForText(run.id);
  await capture("automation");

  await openPage("catalog", "Skills and templates");
  await page.waitForFunction(() => document.querySelector("#templates-title") && document.body.innerText.includes("base"));
  await capture("catalog");
}, 120_000);

test("the administrator reads one organization's agents, deployments, templates and conversations; changes stay with its key", async () => {
  await page.click("xpath/.//header//button[text()='Sign out']");
  await page.waitForSelector("#token");
  await signIn(ADMIN_TOKEN);
  const elsewhere = (await (await svc.fetch("/admin/organizations", { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()).find((o: { name: string }) => o.name === "elsewhere").id;
  await openPage("agents", "Agents and environments");
  await page.select("#org-picker", orgId);
  await waitForText("made-in-console");
  await waitForText("read-only");
  expect(await page.$("form[aria-label='Create an agent']")).toBeNull();
  await page.select("#org-picker", elsewhere);
  await page.waitForFunction(() => !document.body.innerText.includes("made-in-console"));
  await page.select("#org-picker", orgId);
  await openPage("automation", "Endpoints and deployments");
  await press('button[aria-label="Details of nightly"]');
  await page.waitForFunction(() => document.body.innerText.includes("Runs of nightly") && document.querySelector(".related tbody code")?.textContent?.startsWith("drun_"));
  await capture("admin-automation");
  await openPage("catalog", "Skills and templates");
  await page.waitForFunction(() => document.querySelector("#templates-title") && document.body.innerText.includes("base"));
  await openPage("sessions", "Agent sessions");
  await press(`button[aria-label="Open the conversation of ${followedSession}"]`);
  await page.waitForFunction(() => document.querySelector("ol.conversation li.msg.agent")?.textContent?.includes("The sandbox answered 42."));
  expect(await inside("section[aria-labelledby='session-title']")).toContain("Refreshing every 2 s");
  expect(await page.$("#session-message")).toBeNull();
  await capture("admin-sessions");
  await openPage("webhooks", "Webhooks");
  await waitForText("renamed receiver");
  expect(await page.$("button[aria-label='Edit renamed receiver']")).toBeNull();
  expect(await page.content()).not.toContain(ADMIN_TOKEN);
}, 120_000);

test("the accessibility check finds what it looks for", async () => {
  // Markup with one of each problem, added to the page and taken away again.
  await page.evaluate(() => {
    const div = document.createElement("div");
    div.id = "bad-markup";
    div.innerHTML = '<button></button><input id="unlabelled"><p id="faint">faint text</p><table><tr><td>x</td></tr></table><span id="bad-markup"></span>';
    document.querySelector("main").append(div);
    // Set through the CSSOM: the page's CSP refuses inline style attributes.
    Object.assign(document.querySelector("#faint").style, { color: "#bbb", background: "#fff" });
  });
  const found = await accessibilityProblems(page);
  await page.evaluate(() => document.querySelectorAll("#bad-markup").forEach((el: any) => el.remove()));
  expect(found).toEqual(
    expect.arrayContaining([
      "button without an accessible name",
      expect.stringMatching(/^form field without a label: <input id="unlabelled"/),
      expect.stringMatching(/^contrast 1\.\d\d:1 for "faint text"/),
      "table without header cells",
      'id "bad-markup" used 2 times',
    ]),
  );
});

test("no request left for another host; no serious accessibility problem on these pages", () => {
  expect(refused).toEqual([]);
  expect(Object.keys(a11y).sort()).toEqual(["admin-automation", "admin-sessions", "agents", "automation", "catalog", "sandboxes", "session-running", "sessions", "webhooks"]);
  for (const [name, problems] of Object.entries(a11y)) expect(problems, name).toEqual([]);
});
