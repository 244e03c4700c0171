import { afterAll, afterEach } from "bun:test";
import { takeMismatches } from "./contract";

/**
 * Preloaded for every test file (bunfig.toml): a test during which the service answered
 * something its OpenAPI document does not declare fails (see ./contract.ts).
 */
function failOnMismatches(): void {
  const found = takeMismatches();
  if (!found.length) return;
  throw new Error(`the service answered outside its OpenAPI document:\n${found.map((m) => `  ${m.operation} answered ${m.status}: ${m.problem}`).join("\n")}`);
}

afterEach(failOnMismatches);
afterAll(failOnMismatches);
