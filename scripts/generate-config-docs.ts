// Writes the configuration reference's table (docs/configuration.md) from the settings
// module. test/foundation/settings.test.ts fails when the file differs from what this writes.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONFIG_DOC, withGeneratedTable } from "../src/settings/reference-table";

const path = join(import.meta.dir, "..", CONFIG_DOC);
const before = readFileSync(path, "utf8");
const after = withGeneratedTable(before);
if (after === before) console.log(`${CONFIG_DOC} is up to date`);
else {
  writeFileSync(path, after);
  console.log(`${CONFIG_DOC} rewritten`);
}
