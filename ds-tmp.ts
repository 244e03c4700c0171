import { buildCatalog } from "./src/catalog";
const c = buildCatalog();
const by = new Map<string, number>();
for (const m of c.list()) by.set(m.vendor, (by.get(m.vendor) ?? 0) + 1);
console.log(c.list().length, [...by.entries()]);
