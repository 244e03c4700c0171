/**
 * Summarizes the vitest JSON reports of E2B's suites (scripts/e2b-conformance.sh) as
 * markdown: per file passed / failed / not applicable, then every failure with its
 * reason. Reasons come from known-failures.txt (a test that needs E2B's cloud is
 * "not applicable"; a test waiting for work on another part is a failure with that
 * reason); a failure not listed there shows the first line of its error.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";

const { values: a } = parseArgs({
  options: {
    e2b: { type: "string" },
    "e2b-commit": { type: "string" },
    "e2b-tests": { type: "string" },
    ci: { type: "string" },
    "ci-commit": { type: "string" },
    "ci-tests": { type: "string" },
    sdk: { type: "string" },
    "e2b-sdk": { type: "string" },
    "not-run": { type: "string" },
  },
});

interface Assertion {
  fullName: string;
  status: string;
  failureMessages?: string[];
}
interface Report {
  testResults: { name: string; status: string; message?: string; assertionResults: Assertion[] }[];
}

interface Rule {
  suite: string;
  file: string;
  test?: RegExp;
  kind: "n/a" | "fail";
  reason: string;
}

/** known-failures.txt: `<n/a|fail> <suite>:<file>[ :: <test name regex>] | <reason>` per line. */
function rules(): Rule[] {
  const text = readFileSync(join(import.meta.dir, "known-failures.txt"), "utf8");
  const out: Rule[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const m = /^(n\/a|fail)\s+(\w[\w-]*):(\S+)(?:\s+::\s+(.+?))?\s+\|\s+(.+)$/.exec(line);
    if (!m) throw new Error(`known-failures.txt: cannot read "${line}"`);
    out.push({ kind: m[1] as Rule["kind"], suite: m[2], file: m[3], test: m[4] ? new RegExp(m[4]) : undefined, reason: m[5] });
  }
  return out;
}

const RULES = rules();

function rule(suite: string, file: string, test: string): Rule | undefined {
  return RULES.find((r) => r.suite === suite && r.file === file && (!r.test || r.test.test(test)));
}

interface Row {
  file: string;
  passed: number;
  failed: number;
  na: number;
  skipped: number;
}

function summarize(suite: string, reportPath: string, testsDir: string) {
  const report = JSON.parse(readFileSync(reportPath, "utf8")) as Report;
  const rows: Row[] = [];
  const failures: string[] = [];
  const na: string[] = [];
  for (const f of report.testResults.sort((x, y) => x.name.localeCompare(y.name))) {
    const file = relative(testsDir, f.name);
    const row: Row = { file, passed: 0, failed: 0, na: 0, skipped: 0 };
    if (!f.assertionResults.length && f.status === "failed") {
      row.failed++;
      failures.push(`- \`${file}\` (the file did not load): ${firstLine(f.message ?? "")}`);
    }
    for (const t of f.assertionResults) {
      const r = rule(suite, file, t.fullName);
      if (t.status === "skipped" || t.status === "pending" || t.status === "todo") row.skipped++;
      else if (r?.kind === "n/a") {
        row.na++;
        na.push(`- \`${file}\` › ${t.fullName}: ${r.reason}`);
      } else if (t.status === "passed") row.passed++;
      else {
        row.failed++;
        failures.push(`- \`${file}\` › ${t.fullName}: ${r ? r.reason : `unexplained: ${firstLine((t.failureMessages ?? []).join("\n"))}`}`);
      }
    }
    rows.push(row);
  }
  return { rows, failures, na };
}

function firstLine(s: string): string {
  return (s.split("\n").find((l) => l.trim()) ?? "").trim().slice(0, 300);
}

// A suite without a report (SUITES named only the other) is left out.
const suites = [
  ...(a.e2b && existsSync(a.e2b) ? [{ name: "e2b", title: "e2b-dev/E2B packages/js-sdk/tests", commit: a["e2b-commit"], ...summarize("e2b", a.e2b, a["e2b-tests"]!) }] : []),
  ...(a.ci && existsSync(a.ci) ? [{ name: "ci", title: "e2b-dev/code-interpreter js/tests", commit: a["ci-commit"], ...summarize("ci", a.ci, a["ci-tests"]!) }] : []),
];

const total = { passed: 0, failed: 0, na: 0, skipped: 0, other: 0 };
const lines: string[] = [];
for (const s of suites) {
  lines.push(`### ${s.title} @ \`${s.commit}\``, "", "| file | passed | failed | not applicable | skipped by the suite |", "|---|---:|---:|---:|---:|");
  for (const r of s.rows) {
    lines.push(`| ${r.file} | ${r.passed} | ${r.failed} | ${r.na} | ${r.skipped} |`);
    total.passed += r.passed;
    total.failed += r.failed;
    total.na += r.na;
    total.skipped += r.skipped;
  }
  const sum = s.rows.reduce((acc, r) => ({ p: acc.p + r.passed, f: acc.f + r.failed, n: acc.n + r.na }), { p: 0, f: 0, n: 0 });
  lines.push(`| **all** | **${sum.p}** | **${sum.f}** | **${sum.n}** | |`, "");
}
const elsewhere = suites.flatMap((s) => s.failures).filter((f) => /^- .*: (lifecycle|snapshot|template)/.test(f)).length;
const applicable = total.passed + total.failed;
const pct = (n: number, d: number) => (d ? ((100 * n) / d).toFixed(1) : "0.0");
console.log("## Result\n");
console.log(`SDKs: the E2B suite tests its own source (e2b ${a["e2b-sdk"]}); the code interpreter suite runs on e2b ${a.sdk} (its lockfile).\n`);
console.log(`- applicable tests: ${applicable}; passed ${total.passed} (${pct(total.passed, applicable)}%), failed ${total.failed}; not applicable ${total.na}; skipped by the suites themselves ${total.skipped}`);
console.log(`- without the ${elsewhere} lifecycle, snapshot and template tests (work on those parts is under way): passed ${total.passed} of ${applicable - elsewhere} (${pct(total.passed, applicable - elsewhere)}%)\n`);
console.log(`${lines.join("\n")}\n`);
console.log("## Failures\n");
console.log(suites.flatMap((s) => s.failures.map((f) => f.replace("- `", `- ${s.name} \``))).join("\n") || "none");
console.log("\n## Not applicable\n");
console.log(suites.flatMap((s) => s.na.map((f) => f.replace("- `", `- ${s.name} \``))).join("\n") || "none");
const notRun = a["not-run"] && existsSync(a["not-run"]) ? readFileSync(a["not-run"], "utf8").split("\n").filter(Boolean) : [];
console.log("\n## Not run\n");
console.log(notRun.map((l) => `- ${l.replace(/^(\S+) (.*): (\S+)$/, "$1 `$3`: $2")}`).join("\n") || "none");
