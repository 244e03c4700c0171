// Database-independent: the console's pages in a browser; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { LLMock } from "@copilotkit/aimock";
import OpenAI from "openai";
import type { Browser, Page } from "puppeteer-core";
import { consolePage } from "./browser";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";
import { startUsageUpstream, vendorEnv } from "../metering/fixture";

// Functions passed to page.evaluate run in the browser; these name its globals for the type checker.
declare const document: any;
type HTMLInputElement = { value: string; labels?: unknown[] };

// The console in a real headless Chromium (Debian package `chromium`), with every request
// to anything but the service refused and recorded: the console must work offline.
const ARTIFACTS = join(import.meta.dir, "..", "..", "test-artifacts", "console");

let mock: LLMock;
let svc: TestService;
let browser: Browser;
let page: Page;
let org: string;
let refused: string[] = [];
const dialogs: string[] = [];

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  mock = await startUsageUpstream();
  svc = await startTestService({ ...vendorEnv(mock), USAGE_FLUSH_MS: "50" });
  org = await svc.org("acme");
  ({ browser, page, refused } = await consolePage(svc.url, { width: 1280, height: 900 }));
  // The console asks before revoking or killing: accept, and remember what was asked.
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    void d.accept();
  });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await svc?.close();
  await mock?.stop();
});

const text = () => page.evaluate(() => document.body.innerText);
const waitForText = (s: string, timeout = 15_000) => page.waitForFunction((t: string) => document.body.innerText.includes(t), { timeout }, s);
const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

async function signIn(token: string) {
  await page.goto(`${svc.url}/console`, { waitUntil: "domcontentloaded" });
  await page.waitForSelector("#token");
  await page.type("#token", token);
  await page.keyboard.press("Enter");
  await page.waitForSelector("nav");
}

async function openPage(id: string, heading: string) {
  await page.click(`nav a[href="#/${id}"]`);
  await page.waitForFunction((h: string) => document.querySelector("main h1")?.textContent === h, {}, heading);
}

test("the page is served with a strict CSP and its own script only", async () => {
  const res = await svc.fetch("/console");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
  const js = await svc.fetch("/console/app.js");
  expect(js.headers.get("content-type")).toContain("javascript");
  expect((await js.text()).length).toBeGreaterThan(1000);
});

test("a wrong token is refused with a message; the admin token signs in and is never shown", async () => {
  await page.goto(`${svc.url}/console`, { waitUntil: "domcontentloaded" });
  await page.waitForSelector("#token");
  await shot("sign-in");
  await page.type("#token", "not-a-token");
  await page.click("button[type=submit]");
  await waitForText("neither the admin token nor an API key");
  await signIn(ADMIN_TOKEN);
  await waitForText("Signed in as the administrator");
  expect(await text()).not.toContain(ADMIN_TOKEN);
  const html = await page.content();
  expect(html).not.toContain(ADMIN_TOKEN);
  // Kept for the tab only.
  expect(await page.evaluate(() => Object.keys(localStorage).length)).toBe(0);
}, 60_000);

test("keyboard: the skip link comes first, then the page's controls; links work with Enter", async () => {
  // A fresh load (still signed in: the token is in this tab's sessionStorage).
  await page.goto(`${svc.url}/console#/keys`, { waitUntil: "domcontentloaded" });
  // From /console, that was a same-document (hash) navigation: load the page anew.
  await page.reload({ waitUntil: "domcontentloaded" });
  await page.waitForFunction(() => document.querySelector("main h1")?.textContent === "Organizations and keys");
  await page.keyboard.press("Tab");
  expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Skip to content");
  // Then the header's buttons, then the page links in order, up to Usage.
  const visited: string[] = [];
  for (let i = 0; i < 12 && visited.at(-1) !== "Usage"; i++) {
    await page.keyboard.press("Tab");
    visited.push(await page.evaluate(() => document.activeElement?.textContent));
  }
  expect(visited.slice(0, 2)).toEqual(["Dark mode", "Sign out"]);
  expect(visited.at(-1)).toBe("Usage");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelector("main h1")?.textContent === "Usage");
  // The opened page's heading takes the focus (set by an effect once the page has rendered).
  await page.waitForFunction(() => document.activeElement?.tagName === "H1", { timeout: 5000 });
  // Every form control has a label.
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input, select")].filter((el) => !(el as HTMLInputElement).labels?.length && !el.getAttribute("aria-label")).map((el) => el.id || el.outerHTML),
  );
  expect(unlabelled).toEqual([]);
}, 60_000);

let newKey = "";

test("create a key: shown once, then listed by name and prefix only", async () => {
  await openPage("keys", "Organizations and keys");
  await page.select("#keys-org", org);
  await page.type("#key-name", "console-made");
  await page.type("#key-limit", "5");
  await page.click("form[aria-label='Create a key'] button[type=submit]");
  await page.waitForSelector("#new-key");
  newKey = await page.$eval("#new-key", (el) => (el as HTMLInputElement).value);
  expect(newKey).toMatch(/^sk-[0-9a-f]{64}$/);
  await shot("keys");
  const row = await page.waitForFunction(() => [...document.querySelectorAll("tbody tr")].find((tr) => tr.textContent?.includes("console-made"))?.textContent ?? "");
  expect(String(await row.jsonValue())).toContain(newKey.slice(0, 7));
  // Dismissed, the secret is gone from the page for good.
  await page.click(".secret button");
  await page.waitForFunction(() => !document.querySelector("#new-key"));
  expect(await page.content()).not.toContain(newKey);
  // The key is real and limited as entered.
  const keys = (await (await svc.fetch(`/admin/keys?organizationId=${org}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as any[];
  expect(keys.find((k) => k.name === "console-made")?.spendingLimit).toBe(5);
}, 60_000);

test("a chat call made with the new key appears in the request log", async () => {
  const client = new OpenAI({ apiKey: newKey, baseURL: `${svc.url}/v1` });
  const { data, response } = await client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hello from the console test" }] }).withResponse();
  expect(data.choices[0].message.content).toBe("Hello from upstream");
  const requestId = response.headers.get("x-request-id")!;
  await openPage("log", "Request log");
  // Usage is written off the request path: refresh until the row is there (its request id is in the detail, opened by the row's button).
  const openRow = `button[aria-label="Open request ${requestId}"]`;
  for (let i = 0; i < 50 && !(await page.$(openRow)); i++) {
    await Bun.sleep(100);
    await page.click("xpath/.//button[text()='Refresh']");
  }
  await page.waitForSelector(openRow);
  const row = await page.$eval(openRow, (b) => b.closest("tr")?.textContent ?? "");
  expect(row).toContain("gpt-4o");
  expect(row).toContain("200");
  // Filters: another model hides it.
  await page.type("#log-model", "no-such-model");
  await page.click("form[aria-label='Request log filters'] button[type=submit]");
  await waitForText("No requests match.");
  await page.$eval("#log-model", (el) => ((el as HTMLInputElement).value = ""));
  await page.click("form[aria-label='Request log filters'] button[type=submit]");
  await page.waitForSelector(openRow);
  await shot("request-log");
  await openPage("usage", "Usage");
  await page.waitForSelector("svg[role=img] rect[fill]");
  await waitForText("gpt-4o");
  await shot("usage");
}, 60_000);

test("kill a sandbox from the console", async () => {
  const res = await svc.fetch("/sandboxes", { method: "POST", headers: { authorization: `Bearer ${newKey}`, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base" }) });
  expect(res.ok).toBe(true);
  const sb = (await res.json()) as { sandboxID: string };
  await openPage("sandboxes", "Sandboxes");
  await page.select("#org-picker", org);
  await waitForText(sb.sandboxID);
  await shot("sandboxes");
  await page.click(`button[aria-label="Kill ${sb.sandboxID}"]`);
  await waitForText(`Sandbox ${sb.sandboxID} killed.`);
  expect(dialogs.some((d) => d.includes(sb.sandboxID))).toBe(true);
  const after = (await (await svc.fetch(`/sandboxes/${sb.sandboxID}`, { headers: { authorization: `Bearer ${newKey}` } })).json()) as { status: string };
  expect(after.status).toBe("stopped");
}, 90_000);

test("sessions and webhooks pages; an organization key sees only its own organization", async () => {
  await openPage("sessions", "Agent sessions");
  await waitForText("No sessions.");
  await shot("sessions");
  await openPage("webhooks", "Webhooks");
  await waitForText("No webhooks.");
  await shot("webhooks");
  await page.click("xpath/.//header//button[text()='Sign out']");
  await page.waitForSelector("#token");
  // Another organization's request, which the key must not see.
  const other = await svc.key(await svc.org("other"));
  const client = new OpenAI({ apiKey: other.key, baseURL: `${svc.url}/v1` });
  await client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] });
  await signIn(newKey);
  await waitForText("Signed in with an organization key");
  const nav = await page.$$eval("nav a", (as) => as.map((a) => a.textContent));
  expect(nav).not.toContain("Organizations and keys");
  await openPage("log", "Request log");
  await waitForText("gpt-4o");
  expect(await text()).not.toContain("gpt-4o-mini");
  expect(await page.content()).not.toContain(newKey);
  await shot("request-log-organization");
  expect(refused).toEqual([]);
}, 60_000);
