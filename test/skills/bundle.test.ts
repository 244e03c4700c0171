import { describe, expect, test } from "bun:test";
import { ApiError } from "../../src/http/errors";
import { bundleFromUploads, checkPath, MAX_BUNDLE_BYTES } from "../../src/skills/bundle";
import { parseFrontMatter } from "../../src/skills/frontmatter";
import { simpleCommands, skillRunsIn } from "../../src/skills/runs";
import type { SessionSkill } from "../../src/skills/sandbox";
import { readZip, writeZip } from "../../src/skills/zip";
import { pythonZip } from "./helpers";

const enc = (s: string) => new TextEncoder().encode(s);
const SKILL = "---\nname: greeter\ndescription: Greets people.\n---\n# Greeter\n";

/** The 400 message a bundle is refused with. */
function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof ApiError && e.status === 400) return e.message;
    throw e;
  }
  throw new Error("expected a 400 refusal");
}

describe("SKILL.md front matter", () => {
  test("plain, quoted and block values; nested keys are skipped", () => {
    const fm = parseFrontMatter(
      [
        "---",
        "name: pdf-tools",
        'description: "Fills \\"PDF\\" forms: use for invoices"',
        "license: 'it''s MIT'",
        "metadata:",
        "  owner: ops",
        "allowed-tools: [bash, read]",
        "notes: >",
        "  folded",
        "  text",
        "",
        "  second",
        "long: starts here",
        "  and continues # comment",
        "---",
        "body",
      ].join("\r\n"),
    );
    expect(fm.values.get("name")).toBe("pdf-tools");
    expect(fm.values.get("description")).toBe('Fills "PDF" forms: use for invoices');
    expect(fm.values.get("license")).toBe("it's MIT");
    expect(fm.values.get("notes")).toBe("folded text\nsecond");
    expect(fm.values.get("long")).toBe("starts here and continues");
    expect([...fm.structured].sort()).toEqual(["allowed-tools", "metadata"]);
    expect(parseFrontMatter("---\nd: |\n  line one\n  line two\n---\n").values.get("d")).toBe("line one\nline two");
  });

  test("missing or unclosed front matter is refused", () => {
    expect(() => parseFrontMatter("# no front matter")).toThrow(/must start with YAML front matter/);
    expect(() => parseFrontMatter("---\nname: x\n")).toThrow(/not closed/);
    expect(() => parseFrontMatter("---\njust text\n---\n")).toThrow(/is not 'key: value'/);
  });
});

describe("bundle paths", () => {
  test("relative paths pass, normalised", () => {
    expect(checkPath("a/b/c.txt")).toBe("a/b/c.txt");
    expect(checkPath("./a/b")).toBe("a/b");
    expect(checkPath("dir\\file.py")).toBe("dir/file.py");
  });

  test.each([
    ["../etc/passwd", /'\.\.'/],
    ["a/../../b", /'\.\.'/],
    ["..\\..\\windows", /'\.\.'/],
    ["/etc/passwd", /absolute/],
    ["C:/x", /absolute/],
    ["a//b", /empty or '\.' segment/],
    ["a/./b", /empty or '\.' segment/],
    ["bad\u0000name", /control characters/],
    ["line\nbreak", /control characters/],
    [`${"x".repeat(256)}/y`, /longer than 255 bytes/],
    [Array.from({ length: 17 }, () => "d").join("/"), /deeper than 16/],
  ])("%j is refused", (path, message) => {
    expect(refusal(() => checkPath(path))).toMatch(message);
  });
});

describe("bundle layout and metadata", () => {
  test("one top-level directory is stripped; SKILL.md at the root works too; #! files are executable", () => {
    const a = bundleFromUploads([
      { name: "greeter/SKILL.md", data: enc(SKILL) },
      { name: "greeter/scripts/hi.sh", data: enc("#!/bin/sh\necho hi\n") },
    ]);
    expect(a).toMatchObject({ name: "greeter", description: "Greets people." });
    expect(a.files.map((f) => [f.path, f.executable])).toEqual([
      ["SKILL.md", false],
      ["scripts/hi.sh", true],
    ]);
    const b = bundleFromUploads([{ name: "SKILL.md", data: enc(SKILL) }, { name: "ref/notes.md", data: enc("notes") }]);
    expect(b.files.map((f) => f.path)).toEqual(["SKILL.md", "ref/notes.md"]);
  });

  test("the directory names the skill when the front matter has no name", () => {
    expect(bundleFromUploads([{ name: "my-skill/SKILL.md", data: enc("---\ndescription: Does things.\n---\n") }]).name).toBe("my-skill");
  });

  test("refusals say what to fix", () => {
    expect(refusal(() => bundleFromUploads([]))).toMatch(/no files uploaded/);
    expect(refusal(() => bundleFromUploads([{ name: "readme.md", data: enc("x") }]))).toMatch(/no SKILL\.md/);
    expect(refusal(() => bundleFromUploads([{ name: "a/SKILL.md", data: enc(SKILL) }, { name: "b/x", data: enc("x") }]))).toMatch(/one top-level directory/);
    expect(refusal(() => bundleFromUploads([{ name: "a/readme.md", data: enc("x") }]))).toMatch(/no SKILL\.md at the root of its top-level directory 'a\/'/);
    expect(refusal(() => bundleFromUploads([{ name: "SKILL.md", data: enc("# Title only") }]))).toMatch(/front matter/);
    expect(refusal(() => bundleFromUploads([{ name: "SKILL.md", data: enc("---\nname: x\n---\n") }]))).toMatch(/non-empty 'description:'/);
    expect(refusal(() => bundleFromUploads([{ name: "SKILL.md", data: enc("---\ndescription: y\n---\n") }]))).toMatch(/no 'name:'/);
    expect(refusal(() => bundleFromUploads([{ name: "SKILL.md", data: enc("---\nname: Not Kebab\ndescription: y\n---\n") }]))).toMatch(/kebab-case/);
    expect(refusal(() => bundleFromUploads([{ name: "SKILL.md", data: enc(`---\nname: x\ndescription: ${"d".repeat(1025)}\n---\n`) }]))).toMatch(/longer than 1024/);
    expect(refusal(() => bundleFromUploads([{ name: "SKILL.md", data: new Uint8Array([0xff, 0xfe, 0x00]) }]))).toMatch(/not valid UTF-8/);
    expect(refusal(() => bundleFromUploads([{ name: "SKILL.md", data: enc(SKILL) }, { name: "./SKILL.md", data: enc(SKILL) }]))).toMatch(/uploaded twice/);
    expect(refusal(() => bundleFromUploads([{ name: "SKILL.md", data: enc(SKILL) }, { name: "big", data: new Uint8Array(MAX_BUNDLE_BYTES) }]))).toMatch(/at most 8388608 bytes/);
    const many = Array.from({ length: 501 }, (_, i) => ({ name: `f${i}`, data: enc("x") }));
    expect(refusal(() => bundleFromUploads([{ name: "SKILL.md", data: enc(SKILL) }, ...many]))).toMatch(/at most 500/);
  });
});

describe("zip archives", () => {
  test("an archive written by Python's zipfile is read with modes; ours reads back the same", () => {
    const zip = pythonZip([
      { name: "greeter/SKILL.md", text: SKILL },
      { name: "greeter/scripts/run", text: "echo run\n", mode: 0o755 },
      { name: "greeter/empty-dir/", dir: true },
    ]);
    const entries = readZip(zip, { maxTotalBytes: 1 << 20, maxFiles: 10 });
    expect(entries.map((e) => [e.name, e.executable, new TextDecoder().decode(e.data)])).toEqual([
      ["greeter/SKILL.md", false, SKILL],
      ["greeter/scripts/run", true, "echo run\n"],
    ]);
    const again = readZip(writeZip(entries.map((e) => ({ ...e })), new Date()), { maxTotalBytes: 1 << 20, maxFiles: 10 });
    expect(again).toEqual(entries);
    expect(bundleFromUploads([{ name: "upload.zip", data: zip }]).files.map((f) => [f.path, f.executable])).toEqual([
      ["SKILL.md", false],
      ["scripts/run", true],
    ]);
  });

  test("zip bombs, symlinks, traversal names and corrupt archives are refused", () => {
    // 64 MB of zeros compress to a few KB: inflation stops at the bundle limit.
    const bomb = pythonZip([{ name: "SKILL.md", text: SKILL }, { name: "zeros", zeros: 64 * 1024 * 1024 }]);
    expect(bomb.length).toBeLessThan(200_000);
    expect(refusal(() => bundleFromUploads([{ name: "b.zip", data: bomb }]))).toMatch(/larger than 8388608 bytes uncompressed/);
    const link = pythonZip([{ name: "s/SKILL.md", text: SKILL }, { name: "s/passwd", text: "/etc/passwd", mode: 0o120777 }]);
    expect(refusal(() => bundleFromUploads([{ name: "l.zip", data: link }]))).toMatch(/symbolic link/);
    const slip = pythonZip([{ name: "SKILL.md", text: SKILL }, { name: "../../evil.sh", text: "x" }]);
    expect(refusal(() => bundleFromUploads([{ name: "z.zip", data: slip }]))).toMatch(/'\.\.'/);
    const good = pythonZip([{ name: "SKILL.md", text: SKILL }]);
    const corrupt = new Uint8Array(good);
    corrupt[40] ^= 0xff; // inside the first entry's data
    expect(refusal(() => bundleFromUploads([{ name: "c.zip", data: corrupt }]))).toMatch(/corrupt/);
    expect(refusal(() => bundleFromUploads([{ name: "t.zip", data: good.subarray(0, good.length - 30) }]))).toMatch(/not a valid zip/);
  });
});

describe("what counts as a skill run", () => {
  const skill = (name: string): SessionSkill => ({ skillId: `skill_${name}`, versionId: `v_${name}`, name, description: "", dir: `/home/user/skills/${name}` });
  const skills = [skill("greeter"), skill("pdf")];
  const ran = (cmd: string) => skillRunsIn(cmd, skills).map((r) => `${r.skill.name}:${r.path}`);

  test("executing a skill's file, directly or through an interpreter, after cd, with prefixes", () => {
    expect(ran("./skills/greeter/scripts/hi.sh world")).toEqual(["greeter:scripts/hi.sh"]);
    expect(ran("/home/user/skills/greeter/run")).toEqual(["greeter:run"]);
    expect(ran("python3 -u ~/skills/pdf/fill.py in.pdf > out.txt")).toEqual(["pdf:fill.py"]);
    expect(ran("cd skills/greeter && bash scripts/hi.sh")).toEqual(["greeter:scripts/hi.sh"]);
    expect(ran("cd /home/user/skills; cd pdf; ./fill.py")).toEqual(["pdf:fill.py"]);
    expect(ran("FOO=1 timeout 30 sh 'skills/greeter/a b.sh'; uv run skills/pdf/x.py")).toEqual(["greeter:a b.sh", "pdf:x.py"]);
    expect(ran("echo $(./skills/greeter/x) | sort")).toEqual(["greeter:x"]);
    expect(ran("source skills/pdf/env.sh && ./skills/pdf/go && ./skills/pdf/go")).toEqual(["pdf:env.sh"]);
  });

  test("reading a skill's files, inline code and other directories are not runs", () => {
    expect(ran("cat /home/user/skills/greeter/SKILL.md")).toEqual([]);
    expect(ran("ls skills && grep -r hello skills/greeter")).toEqual([]);
    expect(ran("python3 -c 'import skills.greeter' skills/greeter/x.py")).toEqual([]);
    expect(ran("./skills-other/greeter/x.sh")).toEqual([]);
    expect(ran("./skills/greeter-2/x.sh")).toEqual([]);
    expect(ran("echo ./skills/greeter/x.sh # ./skills/pdf/y")).toEqual([]);
    expect(ran("cat < skills/greeter/x.sh")).toEqual([]);
  });

  test("the lexer honours quotes, escapes and separators", () => {
    expect(simpleCommands(`a "b c" 'd;e' f\\ g; h && i | j\nk`)).toEqual([["a", "b c", "d;e", "f g"], ["h"], ["i"], ["j"], ["k"]]);
  });
});
