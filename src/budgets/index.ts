import { Elysia } from "elysia";
import { clockOf } from "../clock";
import { type AuthContext, AUTH_MESSAGES } from "../http/auth";
import { ApiError } from "../http/errors";
import type { RouteModule } from "../http/route-module";
import type { Surface } from "../http/surfaces";
import type { Services } from "../services";
import { usageMeterFor } from "../metering";
import { BudgetLeases } from "./leases";
import { OrgBudgets } from "./org-budgets";
import { limitReached } from "./period";

export const ORG_SPEND_MESSAGE = "organization spending limit exceeded";

const orgBudgets = new WeakMap<Services, OrgBudgets>();

/** The organization budgets of a service (created on first use; started by budgetsModule). */
export function orgBudgetsFor(s: Services): OrgBudgets {
  let b = orgBudgets.get(s);
  if (!b) {
    b = new OrgBudgets(s.db, s.log, { listen: s.database.listen, pollMs: s.config.keyCache.resyncMs });
    orgBudgets.set(s, b);
  }
  return b;
}

const budgetLeases = new WeakMap<Services, BudgetLeases>();

/** This process's budget leases (src/budgets/leases.ts; renewed and given back by budgetsModule). */
export function leasesFor(s: Services): BudgetLeases {
  let l = budgetLeases.get(s);
  if (!l) {
    l = new BudgetLeases(s.db, s.log, () => clockOf(s).now().getTime());
    budgetLeases.set(s, l);
  }
  return l;
}

/**
 * Spending limits, on model surfaces only (those that declare a spend-limit status), in
 * the current period of the service's clock. The key's limit answers the surface's status
 * (spec: 402, 403 on the protocol surfaces); the organization's limit answers 402 on every
 * model surface (spec, Errors: 402 on messages is "insufficient balance or organization
 * spending limit", 403 there is the key's limit).
 */
export function checkBudgets(s: Services, auth: AuthContext, surface: Surface): void {
  if (!surface.spendLimitStatus) return;
  // The clock is read only for a budget with a limit: most keys and organizations have none.
  if (auth.key.spendingLimit !== null && limitReached(auth.key, clockOf(s).now())) {
    throw new ApiError(surface.spendLimitStatus, AUTH_MESSAGES.spend, { code: "spending_limit_exceeded" });
  }
  const org = orgBudgetsFor(s).get(auth.organizationId);
  if (org && org.spendingLimit !== null && limitReached(org, clockOf(s).now())) throw new ApiError(402, ORG_SPEND_MESSAGE, { code: "spending_limit_exceeded" });
}

/**
 * Budgets: a first check after authentication, before the body is read, against the spend
 * the usage meter wrote (src/metering/meter.ts), refuses a budget already spent at the cost of
 * a Map lookup. What makes a limit hold under concurrency is the hold each model request
 * takes before it is forwarded (src/gateway/admission.ts), against the budget this process
 * leased (leases.ts).
 */
export const budgetsModule: RouteModule = {
  surfaces: [],
  routes: () => new Elysia({ name: "budgets" }),
  async start(s) {
    const budgets = orgBudgetsFor(s);
    await budgets.start();
    const leases = leasesFor(s);
    leases.start();
    s.afterAuth.push((auth, surface) => checkBudgets(s, auth, surface));
    return async () => {
      await budgets.stop();
      // Shutdown hooks run in reverse order of start, so this one runs before the usage
      // meter's own drain: drain it here first, so what is given back is really unused.
      await usageMeterFor(s).flush();
      await leases.stop();
    };
  },
};
