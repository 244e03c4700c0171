import { existsSync } from "node:fs";
import puppeteer, { type Browser, type Page } from "puppeteer-core";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/**
 * Headless Debian Chromium on one page of the service: every request to anything but the
 * service (its pages, data: and its own blob: URLs) is refused and recorded in `refused`,
 * so a test can show the console works offline.
 */
export async function consolePage(serviceUrl: string, viewport: { width: number; height: number }): Promise<{ browser: Browser; page: Page; refused: string[] }> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install the Debian package 'chromium' (apt-get install -y chromium)`);
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
  });
  const page = await browser.newPage();
  await page.setViewport(viewport);
  await page.setRequestInterception(true);
  const refused: string[] = [];
  page.on("request", (req) => {
    const url = req.url();
    if (url.startsWith("data:") || url.startsWith(`blob:${serviceUrl}/`) || url === serviceUrl || url.startsWith(`${serviceUrl}/`)) return void req.continue();
    refused.push(url);
    void req.abort("internetdisconnected");
  });
  return { browser, page, refused };
}
