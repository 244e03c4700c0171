import { ADD_HOURLY } from "./hourly";
import { KEY_SPEND, ORG_SPEND, spendUpdate } from "./spend";

// What a usage batch adds besides its rows (the hourly sums, the spend of keys and of
// organizations), as one statement: on the embedded database each statement costs a parse,
// a plan and several protocol messages, a fixed cost per batch paid on the service's CPU.

/**
 * A batch's totals as CTEs around its three JSON parameters (hourly sums, key spend,
 * organization spend), followed by spendUpdates: the hourly sums added, then the spend
 * of keys and of organizations. An empty list updates nothing.
 */
export const TOTALS_CTES = [
  "hourly as (" + ADD_HOURLY[0],
  `${ADD_HOURLY[1]} returning 1), ${KEY_SPEND[0]}`,
  `${KEY_SPEND[1]}, ${ORG_SPEND[0]}`,
  `${ORG_SPEND[1]}, `,
] as const;

/** The key spend's update as a CTE, then the organization spend's as the statement (after TOTALS_CTES). */
export function spendUpdates(holder: string | undefined): string {
  let cached = SPEND_UPDATES.get(holder);
  if (cached === undefined) SPEND_UPDATES.set(holder, (cached = `k_done as (${spendUpdate("k", "api_keys", holder)} returning 1) ${spendUpdate("o", "organizations", holder)}`));
  return cached;
}
/** Per lease holder (one per process, and none): the text is built once. */
const SPEND_UPDATES = new Map<string | undefined, string>();
