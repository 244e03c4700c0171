// Database-independent: the console's gateway pages in a browser; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "puppeteer-core";
import { consolePage } from "./browser";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";
import { accessibilityProblems } from "./a11y";
import { FALL_BACK, type FallbackUpstreams, startFallbackUpstreams, UPSTREAM_SECRETS } from "./fixture";

// Functions passed to page.evaluate run in the browser; these name its globals for the type checker.
declare const document: any;
declare const getComputedStyle: any;

// The overview, providers and models, playground, request log and organizations pages in
// a real headless Chromium (Debian package `chromium`), as the admin and with an
// organization key; every request to anything but the service is refused and recorded.
const ARTIFACTS = join(import.meta.dir, "..", "..", "test-artifacts", "console");
const VIEWPORTS = { desktop: { width: 1440, height: 900 }, phone: { width: 390, height: 844 } };

let up: FallbackUpstreams;
let svc: TestService;
let browser: Browser;
let page: Page;
let acme: string;
let acmeKey: { key: string; id: string };
let otherKey: { key: string; id: string };
let acmeBatchKey: { key: string; id: string };
let refused: string[] = [];

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  up = await startFallbackUpstreams();
  svc = await startTestService({ CONFIG_FILE: up.configFile, USAGE_FLUSH_MS: "50", REQUEST_LOG_BODIES: "true" });
  acme = await svc.org("acme");
  acmeKey = await svc.key(acme, { name: "acme-backend" });
  acmeBatchKey = await svc.key(acme, { name: "acme-batch" });
  otherKey = await svc.key(await svc.org("globex"), { name: "globex-app" });
  ({ browser, page, refused } = await consolePage(svc.url, VIEWPORTS.desktop));
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await svc?.close();
  await up?.stop();
});

const text = (): Promise<string> => page.evaluate(() => document.body.innerText);
const waitForText = (s: string, timeout = 20_000) => page.waitForFunction((t: string) => document.body.innerText.includes(t), { timeout }, s);

/** The page at both window sizes, whole; back to the desktop size after. */
async function shots(name: string) {
  for (const [size, viewport] of Object.entries(VIEWPORTS)) {
    await page.setViewport(viewport);
    await page.screenshot({ path: join(ARTIFACTS, `${name}-${viewport.width}x${viewport.height}.png`), fullPage: true });
    if (size === "phone") await page.setViewport(VIEWPORTS.desktop);
  }
}

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

async function chat(key: string, model: string, content: string, stream = false): Promise<string> {
  const res = await svc.fetch("/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content }], stream }),
  });
  expect(res.status).toBe(200);
  await res.text();
  return res.headers.get("x-request-id")!;
}

const figure = (name: string): Promise<string> => page.$eval(`[data-figure="${name}"]`, (el: any) => el.textContent);

test("the overview opens first and updates by itself after a chat request", async () => {
  await signIn(ADMIN_TOKEN);
  await page.waitForFunction(() => document.querySelector("main h1")?.textContent === "Overview");
  await page.waitForSelector('[data-figure="requests"]');
  expect(await figure("requests")).toBe("0");
  await chat(acmeKey.key, "solo", "hello from the overview test");
  // No click: the live overview asks again every few seconds.
  await page.waitForFunction(() => document.querySelector('[data-figure="requests"]')?.textContent === "1", { timeout: 30_000 });
  expect(await figure("error-rate")).toBe("0.0 %");
  await waitForText("solo");
  expect(await page.$$eval("svg[role=img]", (svgs: any[]) => svgs.length)).toBe(4);
  await shots("overview");
}, 90_000);

test("the playground streams an answer from the upstream, with the exact request and the gateway's timing", async () => {
  await openPage("playground", "Playground");
  // The admin token calls no model: an organization key is pasted, kept in the page only.
  await page.type("#pg-key", acmeKey.key);
  await page.keyboard.press("Tab");
  await page.waitForFunction(() => [...document.querySelectorAll("#pg-models option")].some((o: any) => o.value === "solo"));
  await page.$eval("#pg-model", (el: any) => (el.value = ""));
  await page.type("#pg-model", "solo");
  await page.type("#pg-message", "stream to the playground");
  // Every text the answer showed on its way: a stream shows it growing.
  await page.evaluate(() => {
    (globalThis as any).seen = [];
    new (globalThis as any).MutationObserver(() => {
      const t = document.querySelector('[data-part="answer"]')?.textContent;
      if (t && (globalThis as any).seen.at(-1) !== t) (globalThis as any).seen.push(t);
    }).observe(document.querySelector("main"), { subtree: true, childList: true, characterData: true });
  });
  await page.click("form[aria-label='Chat request'] button[type=submit]");
  await page.waitForFunction(() => document.querySelector('[data-part="answer"]')?.textContent === "Hello from the secondary upstream, streamed in pieces", { timeout: 30_000 });
  const seen: string[] = await page.evaluate(() => (globalThis as any).seen);
  expect(seen.length).toBeGreaterThan(2);
  expect(seen.every((s, i) => i === 0 || s.startsWith(seen[i - 1]))).toBe(true);
  const request = JSON.parse((await page.$eval('[data-part="request"]', (el: any) => el.textContent)).split("\n\n")[1]);
  expect(request).toEqual({ model: "solo", messages: [{ role: "user", content: "stream to the playground" }], max_tokens: 256, stream: true });
  const timing = await page.$eval('[data-part="timing"]', (el: any) => el.textContent);
  expect(timing).toMatch(/server-timing.*gateway;dur=[\d.]+, upstream;dur=[\d.]+/);
  expect(timing).toContain("x-gateway-providersecondary");
  expect(timing).toMatch(/x-request-id/);
  // The answer's text is whole before its stream ends (the finish chunk, then [DONE]).
  await waitForText("whole answer (browser)");
  expect(await page.$eval('[data-part="raw"]', (el: any) => el.textContent)).toContain("data: [DONE]");
  // The pasted key is in no attribute of the page and in no storage.
  expect(await page.content()).not.toContain(acmeKey.key);
  expect(await page.evaluate(() => JSON.stringify({ ...(globalThis as any).sessionStorage, ...(globalThis as any).localStorage }))).not.toContain(acmeKey.key);
  await shots("playground");
}, 90_000);

test("the request log fits the window, names organizations and keys, and opens a row with its fallback", async () => {
  const batchRequest = await chat(acmeBatchKey.key, "solo", "from the batch key");
  const requestId = await chat(acmeKey.key, "duo", FALL_BACK);
  await openPage("log", "Request log");
  const openButton = `button[aria-label="Open request ${requestId}"]`;
  for (let i = 0; i < 50 && !(await page.$(openButton)); i++) {
    await Bun.sleep(100);
    await page.click("xpath/.//button[text()='Refresh']");
  }
  await page.waitForSelector(openButton);
  const row = await page.$eval(openButton, (b: any) => b.closest("tr").innerText);
  expect(row).toContain("acme");
  expect(row).toContain("acme-backend");
  expect(row).toContain("fallback");
  expect(row).not.toContain(acme);
  expect(row).not.toContain(acmeKey.id);
  // 1440 px wide: no horizontal scrolling, and each time on one line.
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1440);
  const timeLines: number[] = await page.$$eval("table.log time", (ts: any[]) => ts.map((t) => t.getClientRects().length));
  expect(timeLines.length).toBeGreaterThan(1);
  expect(timeLines.every((n) => n === 1)).toBe(true);
  await page.waitForSelector(`button[aria-label="Open request ${batchRequest}"]`);
  // The admin narrows to an organization, then to one of its keys by name.
  await page.select("#log-org", acme);
  await page.waitForFunction((id: string) => [...document.querySelectorAll("#log-key option")].some((o: any) => o.value === id), {}, acmeKey.id);
  await page.select("#log-key", acmeKey.id);
  await page.click("form[aria-label='Request log filters'] button[type=submit]");
  await page.waitForSelector(openButton);
  const keysShown: string[] = await page.$$eval("table.log tbody tr", (trs: any[]) => trs.map((tr) => tr.children[2].innerText));
  expect(keysShown.length).toBeGreaterThan(1);
  expect(new Set(keysShown)).toEqual(new Set(["acme-backend"]));
  // Search narrows the page to that request.
  await page.type("#log-search", requestId.slice(-8));
  await page.waitForFunction(() => document.querySelectorAll("table.log tbody tr").length === 1);
  await shots("request-log");
  await page.click(openButton);
  await page.waitForSelector("dialog.detail[open]");
  const detail = await page.$eval("dialog.detail", (d: any) => d.innerText);
  expect(detail).toContain(requestId);
  expect(detail).toMatch(/primary \/ m\s+500: provider primary answered 500/);
  expect(detail).toMatch(/secondary \/ m\s+answered \(fallback\) with 200/);
  expect(detail).toContain("of which cache reads");
  // REQUEST_LOG_BODIES is on here: the body sent upstream is shown.
  expect(detail).toContain(FALL_BACK);
  await page.screenshot({ path: join(ARTIFACTS, "request-log-detail-1440x900.png") });
  // Escape closes it and the focus goes back to the row's button.
  await page.keyboard.press("Escape");
  await page.waitForFunction(() => !document.querySelector("dialog.detail"));
  expect(await page.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe(`Open request ${requestId}`);
}, 90_000);

test("providers and models: routes, prices, the cool-down after the failure, recent errors, no credential", async () => {
  await openPage("providers", "Providers and models");
  await waitForText("Recent upstream failures");
  await page.type("#models-search", "duo");
  const duo = await page.waitForFunction(() => [...document.querySelectorAll("tbody tr")].find((tr: any) => tr.innerText.startsWith("duo"))?.innerText ?? "");
  const duoRow = String(await duo.jsonValue());
  expect(duoRow).toContain("$3");
  expect(duoRow).toContain("$15");
  expect(duoRow).toMatch(/primary \/ m: cooling down until/);
  expect(duoRow).toMatch(/secondary \/ m: healthy/);
  expect(await text()).toContain("primary broke");
  const html = await page.content();
  for (const secret of [...UPSTREAM_SECRETS, ADMIN_TOKEN]) expect(html).not.toContain(secret);
  await shots("providers");
}, 60_000);

test("organizations and keys: the organization's budget is visible and editable", async () => {
  await openPage("keys", "Organizations and keys");
  await page.select("#keys-org", acme);
  await page.waitForSelector("#org-limit");
  await page.type("#org-limit", "25");
  await page.select("#org-period", "monthly");
  await page.click("form[aria-label='Organization budget'] button[type=submit]");
  await waitForText("Budget of acme saved.");
  const orgs = (await (await svc.fetch("/admin/organizations", { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as any[];
  expect(orgs.find((o) => o.id === acme)).toMatchObject({ spendingLimit: 25, spendingPeriod: "monthly" });
  // The organization, read again: its period's end and the limit as saved.
  await waitForText("(resets ");
  expect(await page.$eval("#org-limit", (el: any) => el.value)).toBe("25");
  await shots("keys");
}, 60_000);

test("accessibility: every control named, no text below WCAG AA contrast, in light and dark", async () => {
  const problems: string[] = [];
  for (const [id, heading] of [["overview", "Overview"], ["providers", "Providers and models"], ["usage", "Usage"], ["log", "Request log"], ["playground", "Playground"], ["keys", "Organizations and keys"]]) {
    await openPage(id, heading);
    await Bun.sleep(300);
    // The usage charts have no test of their own here: their screenshots are taken on the way.
    if (id === "usage") await shots("usage");
    for (const theme of ["light", "dark"]) {
      await page.evaluate((t: string) => (document.documentElement.dataset.theme = t), theme);
      problems.push(...(await accessibilityProblems(page)).map((p) => `${id} (${theme}): ${p}`));
    }
  }
  expect(problems).toEqual([]);
  // The check itself finds what it looks for: an unnamed button and faint text, added for a moment.
  await page.evaluate(() => {
    const probe = document.createElement("div");
    probe.id = "a11y-probe";
    probe.append(document.createElement("button"));
    const faint = document.createElement("p");
    faint.textContent = "faint text";
    faint.style.color = "#888";
    faint.style.background = "#777";
    probe.append(faint);
    document.querySelector("main").append(probe);
  });
  const found = await accessibilityProblems(page);
  await page.evaluate(() => document.querySelector("#a11y-probe").remove());
  expect(found.some((p) => p.startsWith("button without an accessible name"))).toBe(true);
  expect(found.some((p) => p.includes('"faint text"'))).toBe(true);
}, 90_000);

test("dark mode: the system's preference, and the toggle", async () => {
  await page.evaluate(() => delete document.documentElement.dataset.theme);
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "dark" }]);
  await openPage("overview", "Overview");
  const background = () => page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
  expect(await background()).toBe("rgb(17, 24, 39)");
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);
  expect(await background()).toBe("rgb(249, 250, 251)");
  const toggle = "xpath/.//header//button[text()='Dark mode']";
  const backgroundIs = (c: string) => page.waitForFunction((want: string) => getComputedStyle(document.documentElement).backgroundColor === want, { timeout: 5000 }, c);
  await page.click(toggle);
  await backgroundIs("rgb(17, 24, 39)");
  expect(await page.$eval("header button[aria-pressed]", (b: any) => b.getAttribute("aria-pressed"))).toBe("true");
  await shots("overview-dark");
  await page.click(toggle);
  await backgroundIs("rgb(249, 250, 251)");
  expect(await page.$eval("header button[aria-pressed]", (b: any) => b.getAttribute("aria-pressed"))).toBe("false");
}, 60_000);

test("an organization key sees only its own organization", async () => {
  await chat(otherKey.key, "solo", "globex's own request");
  await page.click("xpath/.//header//button[text()='Sign out']");
  await page.waitForSelector("#token");
  await signIn(otherKey.key);
  await waitForText("Signed in with an organization key");
  const nav: string[] = await page.$$eval("nav a", (as: any[]) => as.map((a) => a.textContent));
  expect(nav).toEqual(expect.arrayContaining(["Overview", "Usage", "Request log", "Playground"]));
  expect(nav).not.toContain("Providers and models");
  expect(nav).not.toContain("Organizations and keys");
  await page.waitForFunction(() => document.querySelector('[data-figure="requests"]')?.textContent === "1", { timeout: 30_000 });
  await page.select("#ov-group", "key");
  await waitForText("globex-app");
  expect(await text()).not.toContain("acme");
  await shots("overview-organization");
  await openPage("log", "Request log");
  await waitForText("globex-app");
  const rows: string[] = await page.$$eval("table.log tbody tr", (trs: any[]) => trs.map((tr) => tr.innerText));
  expect(rows).toHaveLength(1);
  expect(await text()).not.toContain("acme");
  // The admin's reads stay closed to it, whatever the page asks.
  expect((await svc.fetch("/admin/gateway", { headers: { authorization: `Bearer ${otherKey.key}` } })).status).toBe(401);
  // The playground uses the key signed in with: no key field.
  await openPage("playground", "Playground");
  expect(await page.$("#pg-key")).toBeNull();
  await waitForText("Requests use the key you signed in with");
  expect(await page.content()).not.toContain(otherKey.key);
  expect(refused).toEqual([]);
}, 90_000);
