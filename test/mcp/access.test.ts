// Database-independent: allow-list matching and tool names only.
import { expect, test } from "bun:test";
import { accessOf, splitName } from "../../src/mcp/access";

test("no allow list, or an empty one, reaches nothing", () => {
  for (const list of [null, undefined, {}, { servers: [], tools: [] }]) {
    const a = accessOf(list);
    expect(a.server("docs")).toBe(false);
    expect(a.tool("docs", "search")).toBe(false);
    expect(a.all).toBe(false);
  }
});

test("servers allow every tool of a server; * every server and management", () => {
  const a = accessOf({ servers: ["calc"] });
  expect(a.tool("calc", "add")).toBe(true);
  expect(a.tool("calc-evil", "add")).toBe(false);
  expect(a.tool("docs", "search")).toBe(false);
  expect(a.all).toBe(false);
  const all = accessOf({ servers: ["*"] });
  expect(all.tool("anything", "at_all")).toBe(true);
  expect(all.all).toBe(true);
});

test("tool patterns match whole namespaced names, * as the only wildcard", () => {
  const a = accessOf({ tools: ["docs__search", "github__get_*", "*__ping"] });
  expect(a.tool("docs", "search")).toBe(true);
  expect(a.tool("docs", "search2")).toBe(false);
  expect(a.tool("docs", "drop_tables")).toBe(false);
  expect(a.tool("github", "get_issue")).toBe(true);
  expect(a.tool("github", "delete_repo")).toBe(false);
  expect(a.tool("any", "ping")).toBe(true);
  // Which servers are worth asking for their tools.
  expect(a.server("docs")).toBe(true);
  expect(a.server("github")).toBe(true);
  expect(a.server("other")).toBe(true); // *__ping may match any server's ping
  expect(accessOf({ tools: ["docs__search"] }).server("other")).toBe(false);
  // Regular-expression characters are literal (the schema refuses most of them anyway).
  expect(accessOf({ tools: ["docs__a.b"] }).tool("docs", "axb")).toBe(false);
});

test("a namespaced name splits at its first separator; server names hold no underscore", () => {
  expect(splitName("docs__search")).toEqual({ server: "docs", tool: "search" });
  expect(splitName("docs__a__b")).toEqual({ server: "docs", tool: "a__b" });
  expect(splitName("__search")).toBeUndefined();
  expect(splitName("docs")).toBeUndefined();
  expect(splitName("do_cs__x")).toBeUndefined();
  expect(splitName("docs__")).toBeUndefined();
});
