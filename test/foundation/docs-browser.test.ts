// Database-independent: the API reference page in a browser; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import puppeteer, { type Browser } from "puppeteer-core";
import { startTestService, type TestService } from "../helpers/service";

// A real headless Chromium (Debian package `chromium`) loading /docs with every request to
// anything but the service refused: the page must render from what the service serves.
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

let svc: TestService;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install the Debian package 'chromium' (apt-get install -y chromium)`);
  svc = await startTestService();
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"],
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await svc?.close();
});

/** The page's visible text (runs in the browser). */
const pageText = () => (globalThis as unknown as { document: { body: { innerText: string } } }).document.body.innerText;

/** A page whose requests outside `allowed` origins are refused and recorded. */
async function offlinePage(allowed: string[]) {
  const page = await browser.newPage();
  const refused: string[] = [];
  await page.setRequestInterception(true);
  page.on("request", (req) => {
    const url = req.url();
    if (url.startsWith("data:") || url.startsWith("blob:") || allowed.some((o) => url === o || url.startsWith(`${o}/`))) return void req.continue();
    refused.push(url);
    void req.abort("internetdisconnected");
  });
  return { page, refused };
}

test("/docs renders the operations list with no network beyond the service", async () => {
  const { page, refused } = await offlinePage([svc.url]);
  // A desktop-sized window, so the sidebar with the operation groups is laid out too.
  await page.setViewport({ width: 1400, height: 1000 });
  const failed: string[] = [];
  page.on("requestfailed", (req) => failed.push(`${req.url()} ${req.failure()?.errorText}`));
  const res = await page.goto(`${svc.url}/docs`, { waitUntil: "domcontentloaded" });
  expect(res?.status()).toBe(200);
  // The operations list of each tag (method and path) and the tag groups of the sidebar,
  // as the renderer lays them out from /openapi.json.
  await page.waitForFunction(`document.body.innerText.includes("/v1/chat/completions")`, { timeout: 80_000 });
  const text = await page.evaluate(pageText);
  expect(text).toContain("Model gateway, sandbox and agents API");
  for (const op of ["/healthz", "/v1/chat/completions", "/v1/messages", "/v1/responses"]) expect(text).toContain(op);
  for (const group of ["model gateway", "sandboxes", "agents", "events"]) expect(text).toContain(group);
  // Nothing was even attempted outside the service (fonts, telemetry, CDN scripts).
  expect(refused).toEqual([]);
  expect(failed).toEqual([]);
  await page.close();
}, 120_000);

test("a page of another origin calls the API from the browser (CORS preflight, then the request)", async () => {
  const { key } = await svc.key(await svc.org());
  // The caller's page is served from a second local server: another origin (other port).
  const site = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("<!doctype html><title>app</title>", { headers: { "content-type": "text/html" } }) });
  try {
    const origin = `http://127.0.0.1:${site.port}`;
    const { page, refused } = await offlinePage([svc.url, origin]);
    await page.goto(origin);
    const result = await page.evaluate(
      async (url, k) => {
        const r = await fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${k}`, "content-type": "application/json", "x-stainless-lang": "js" },
          body: JSON.stringify({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] }),
        });
        return { status: r.status, body: await r.json(), requestId: r.headers.get("x-request-id") };
      },
      svc.url,
      key,
    );
    // The browser let the page read the service's answer (a 404 in the chat error shape).
    expect(result.status).toBe(404);
    expect(result.body.error.type).toBe("not_found_error");
    expect(result.requestId).toBeTruthy();
    expect(refused).toEqual([]);
    await page.close();
  } finally {
    site.stop(true);
  }
}, 60_000);
