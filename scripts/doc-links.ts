// Checks the relative links of the documentation: every link of README.md, docs/*.md and
// plugins/README.md to a file of the repository names one that exists, and every anchor
// (`#section`, `guide.md#section`) names a heading of its page as GitHub renders it.
// Used by test/foundation/doc-links.test.ts; `bun scripts/doc-links.ts` prints the broken ones.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

/** The documentation pages whose links are checked, relative to the repository root. */
export function documentationPages(root: string): string[] {
  const docs = readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`);
  return ["README.md", ...docs, "plugins/README.md"].filter((f) => existsSync(join(root, f)));
}

/**
 * GitHub's heading id: the rendered text, lower-cased, with every character that is not a
 * letter, a digit, a space, a hyphen or an underscore dropped, and each space made a hyphen
 * (hyphens are not collapsed: "Host routing: ports" is `host-routing-ports`, "a - b" is `a---b`).
 */
export function githubSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // a link or an image shows its text
    .replace(/<[^>]+>/g, "") // inline HTML tags are not text
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "").replace(/ /g, "-");
}

/** Lines outside fenced code blocks, with their 1-based numbers (a fence's content is not markdown). */
function proseLines(markdown: string): { line: string; n: number }[] {
  const out: { line: string; n: number }[] = [];
  let fence: string | undefined;
  markdown.split("\n").forEach((line, i) => {
    const m = /^\s{0,3}(```+|~~~+)/.exec(line);
    if (m) {
      if (!fence) fence = m[1];
      else if (line.trim().startsWith(fence)) fence = undefined;
      return;
    }
    if (!fence) out.push({ line, n: i + 1 });
  });
  return out;
}

/** The anchors a page offers: its headings' ids (repeats numbered -1, -2, as GitHub does) and explicit `<a id>`/`<a name>`. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { line } of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const base = githubSlug(heading[1]);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
  }
  return anchors;
}

/** Inline links and images `[text](target)` and reference definitions `[label]: target`, outside code. */
export function linksOf(markdown: string): { target: string; line: number }[] {
  const links: { target: string; line: number }[] = [];
  for (const { line, n } of proseLines(markdown)) {
    const prose = line.replace(/(`+)[\s\S]*?\1/g, ""); // inline code is not a link
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ target: m[1], line: n });
    const def = /^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(\s|$)/.exec(prose);
    if (def) links.push({ target: def[1], line: n });
  }
  return links;
}

/** Every broken relative link or anchor of the pages, as `page:line: target (why)`. */
export function brokenLinks(root: string, pages = documentationPages(root)): string[] {
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (file: string) => {
    let set = anchorCache.get(file);
    if (!set) anchorCache.set(file, (set = anchorsOf(readFileSync(file, "utf8"))));
    return set;
  };
  const broken: string[] = [];
  for (const page of pages) {
    const file = join(root, page);
    for (const { target, line } of linksOf(readFileSync(file, "utf8"))) {
      // Other sites are not this check's business (and the tests reach no internet).
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) continue;
      const hash = target.indexOf("#");
      const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
      const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
      const dest = pathPart === "" ? file : resolve(dirname(file), pathPart.replace(/\?.*$/, ""));
      const where = `${page}:${line}: ${target}`;
      if (relative(root, dest).startsWith("..")) broken.push(`${where} (outside the repository)`);
      else if (!existsSync(dest)) broken.push(`${where} (no such file: ${relative(root, dest)})`);
      else if (anchor !== undefined && dest.endsWith(".md") && statSync(dest).isFile() && !anchors(dest).has(anchor))
        broken.push(`${where} (no heading with that anchor in ${relative(root, dest)})`);
    }
  }
  return broken;
}

if (import.meta.main) {
  const broken = brokenLinks(join(import.meta.dir, ".."));
  for (const b of broken) console.log(b);
  console.log(broken.length ? `${broken.length} broken link(s)` : "every relative link and anchor resolves");
  process.exit(broken.length ? 1 : 0);
}
