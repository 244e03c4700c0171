import { settingVariables } from "./index";
import { SETTING_GROUPS } from "./reference";

/** Where the table lives, and the lines around it that the generator keeps. */
export const CONFIG_DOC = "docs/configuration.md";
export const TABLE_START = "<!-- The table below is generated from src/settings (scripts/generate-config-docs.ts); edit src/settings/reference.ts, then run `npm run docs:config`. -->";
export const TABLE_END = "<!-- End of the generated table. -->";

/** A table cell: a pipe would end it early. */
const cell = (markdown: string) => markdown.replace(/\|/g, "\\|");

/**
 * The configuration table: each group of src/settings/reference.ts in order, each variable
 * with its documented default and meaning, and what its parser accepts (the same words a bad
 * value's start-up error uses). A variable the settings module reads without a row here, or a
 * row for one it does not read, is an error: the reference lists exactly what the service reads.
 */
export function configurationTable(): string {
  const variables = new Map(settingVariables().map((v) => [v.name, v]));
  const documented = new Set<string>();
  const rows = ["| Variable | Default | Meaning | Accepts |", "|---|---|---|---|"];
  for (const group of SETTING_GROUPS) {
    rows.push(`| **${group.title}**${group.see ? ` (${group.see})` : ""} | | | |`);
    for (const [name, doc] of Object.entries(group.variables)) {
      const variable = variables.get(name);
      if (!variable) throw new Error(`src/settings/reference.ts documents ${name}, which the settings module does not read`);
      if (documented.has(name)) throw new Error(`src/settings/reference.ts documents ${name} twice`);
      documented.add(name);
      rows.push(`| \`${name}\` | ${cell(doc.default)} | ${cell(doc.meaning)} | ${cell(variable.accepts)} |`);
    }
  }
  const missing = [...variables.keys()].filter((name) => !documented.has(name));
  if (missing.length) throw new Error(`src/settings/reference.ts has no row for ${missing.join(", ")}: add each to its group`);
  return rows.join("\n");
}

/** The document with its table replaced by the generated one (the text around it is kept). */
export function withGeneratedTable(doc: string): string {
  const start = doc.indexOf(TABLE_START);
  const end = doc.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`${CONFIG_DOC} lacks the generated-table markers`);
  return `${doc.slice(0, start + TABLE_START.length)}\n${configurationTable()}\n${doc.slice(end)}`;
}
