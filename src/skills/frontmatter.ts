/**
 * The YAML front matter of a SKILL.md: the block between a leading `---` line and the
 * next `---` line. Only what skill authors write in practice is understood, for the
 * top-level keys: plain scalars (also continued on indented lines), single- and
 * double-quoted strings, and `|` / `>` block scalars. Nested mappings and lists (e.g.
 * `metadata:`, `allowed-tools:`) are skipped; a key given as one reads as absent.
 */

export class FrontMatterError extends Error {}

export interface FrontMatter {
  /** Top-level string values by key. */
  values: Map<string, string>;
  /** Top-level keys whose value is not a string (a nested mapping or list). */
  structured: Set<string>;
}

const KEY_LINE = /^([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*:(?:\s+(.*))?\s*$/;
const indentOf = (line: string) => line.length - line.trimStart().length;

export function parseFrontMatter(text: string): FrontMatter {
  const lines = text.replace(/^\uFEFF/, "").replace(/\r\n?/g, "\n").split("\n");
  if (lines[0]?.trimEnd() !== "---") throw new FrontMatterError("SKILL.md must start with YAML front matter: a '---' line, then 'name:' and 'description:', then '---'");
  const end = lines.findIndex((l, i) => i > 0 && (l.trimEnd() === "---" || l.trimEnd() === "..."));
  if (end < 0) throw new FrontMatterError("SKILL.md front matter is not closed by a '---' line");
  const body = lines.slice(1, end);
  const values = new Map<string, string>();
  const structured = new Set<string>();
  let i = 0;
  while (i < body.length) {
    const line = body[i];
    if (!line.trim() || line.trimStart().startsWith("#") || indentOf(line) > 0) {
      i++;
      continue;
    }
    const m = KEY_LINE.exec(line);
    if (!m) throw new FrontMatterError(`SKILL.md front matter line ${i + 2} is not 'key: value': ${JSON.stringify(line.slice(0, 80))}`);
    const key = m[1];
    const raw = (m[2] ?? "").trim();
    // The lines that belong to this key: indented (or blank) lines up to the next key.
    let j = i + 1;
    while (j < body.length && (!body[j].trim() || indentOf(body[j]) > 0)) j++;
    const more = body.slice(i + 1, j);
    i = j;
    const block = /^([|>])[+-]?[0-9]?\s*(#.*)?$/.exec(raw);
    if (block) values.set(key, blockScalar(block[1] as "|" | ">", more));
    else if (raw === "" || raw.startsWith("#")) {
      if (more.some((l) => l.trim())) structured.add(key);
      else values.set(key, "");
    } else if (raw.startsWith('"')) values.set(key, doubleQuoted([raw, ...more.map((l) => l.trim())].join(" "), key));
    else if (raw.startsWith("'")) values.set(key, singleQuoted([raw, ...more.map((l) => l.trim())].join(" "), key));
    else if (raw.startsWith("[") || raw.startsWith("{")) structured.add(key);
    else {
      // A plain scalar may continue on indented lines; they fold into one line.
      const parts = [raw, ...more.map((l) => l.trim()).filter(Boolean)].map((p) => p.replace(/\s+#.*$/, ""));
      values.set(key, parts.join(" ").trim());
    }
  }
  return { values, structured };
}

function blockScalar(style: "|" | ">", lines: string[]): string {
  const content = lines.filter((l) => l.trim());
  const indent = content.length ? Math.min(...content.map(indentOf)) : 0;
  const stripped = lines.map((l) => l.slice(Math.min(indent, indentOf(l))));
  if (style === "|") return stripped.join("\n").trim();
  // Folded: single line breaks become spaces, blank lines stay line breaks.
  return stripped
    .join("\n")
    .trim()
    .split(/\n{2,}/)
    .map((para) => para.split("\n").join(" "))
    .join("\n");
}

function doubleQuoted(s: string, key: string): string {
  const end = s.lastIndexOf('"');
  if (end <= 0) throw new FrontMatterError(`SKILL.md front matter: '${key}' has an unterminated double-quoted string`);
  try {
    return JSON.parse(s.slice(0, end + 1)) as string;
  } catch {
    return s.slice(1, end);
  }
}

function singleQuoted(s: string, key: string): string {
  const end = s.lastIndexOf("'");
  if (end <= 0) throw new FrontMatterError(`SKILL.md front matter: '${key}' has an unterminated single-quoted string`);
  return s.slice(1, end).replace(/''/g, "'");
}
