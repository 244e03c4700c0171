// Database-independent: reads the documentation files only; the PostgreSQL pass of npm test leaves it out.
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { anchorsOf, brokenLinks, documentationPages, githubSlug } from "../../scripts/doc-links";

const root = join(import.meta.dir, "../..");
const scratch = mkdtempSync(join(tmpdir(), "gw-doc-links-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

test("every relative link and anchor of README.md, docs/ and plugins/README.md resolves", () => {
  const pages = documentationPages(root);
  expect(pages).toContain("README.md");
  expect(pages).toContain("docs/configuration.md");
  expect(brokenLinks(root, pages)).toEqual([]);
});

test("the README stays a first page: under 250 lines", () => {
  expect(readFileSync(join(root, "README.md"), "utf8").split("\n").length).toBeLessThan(250);
});

test("anchors follow GitHub's rules for heading ids", () => {
  expect(githubSlug("Host routing: ports from outside")).toBe("host-routing-ports-from-outside");
  expect(githubSlug("Asynchronous generation (images, speech, video)")).toBe("asynchronous-generation-images-speech-video");
  expect(githubSlug("CONFIG_FILE: providers, routes, gateway options")).toBe("config_file-providers-routes-gateway-options");
  expect(githubSlug("Model catalog, usage metering, spending and rate limits")).toBe("model-catalog-usage-metering-spending-and-rate-limits");
  expect(githubSlug("The `claude` template")).toBe("the-claude-template");
  expect(githubSlug("a - b")).toBe("a---b");
  expect(githubSlug("See [the guide](x.md) über")).toBe("see-the-guide-über");
  // Repeated headings are numbered; a heading inside a code block is not one.
  expect([...anchorsOf("# A\n## A\n```\n# B\n```\n## A\n")]).toEqual(["a", "a-1", "a-2"]);
});

test("a missing file, a missing anchor and a link out of the repository are each reported with the page and line", () => {
  const repo = join(scratch, "repo");
  mkdirSync(join(repo, "docs"), { recursive: true });
  writeFileSync(join(repo, "docs", "guide.md"), "# Guide\n\n## Real section\n");
  writeFileSync(
    join(repo, "README.md"),
    [
      "# Title",
      "[ok](docs/guide.md#real-section) [ok](#title) [web](https://example.com/x#y) `[code](nowhere.md)`",
      "[gone](docs/missing.md)",
      "[bad anchor](docs/guide.md#no-such-section)",
      "```",
      "[in a code block](ignored.md)",
      "```",
      "[up](../../etc/passwd) [self](#nope)",
    ].join("\n"),
  );
  expect(brokenLinks(repo)).toEqual([
    "README.md:3: docs/missing.md (no such file: docs/missing.md)",
    "README.md:4: docs/guide.md#no-such-section (no heading with that anchor in docs/guide.md)",
    "README.md:8: ../../etc/passwd (outside the repository)",
    "README.md:8: #nope (no heading with that anchor in README.md)",
  ]);
});

test("docs/security.md links every source file that documents a threat", () => {
  const security = readFileSync(join(root, "docs/security.md"), "utf8");
  const linked = new Set([...security.matchAll(/\]\(\.\.\/((?:src|plugins)\/[^)#]+)\)/g)].map((m) => m[1]));
  const documenting = [...new Bun.Glob("{src,plugins}/**/*.{ts,tsx}").scanSync({ cwd: root })]
    .filter((file) => /\bThreats?\b/.test(readFileSync(join(root, file), "utf8")))
    .sort();
  expect(documenting.length).toBeGreaterThan(50);
  expect(documenting.filter((file) => !linked.has(file))).toEqual([]);
});
