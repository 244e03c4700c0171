import type { TokenReservation } from "../limits/tokens";
import type { BudgetLeases, LeasedAmount } from "./leases";

/**
 * What a request holds while it is in flight: its maximum cost against the key's and the
 * organization's budgets (only those that have a limit), taken from this process's budget
 * leases (src/budgets/leases.ts), and its maximum tokens in the key's token window. The
 * usage meter settles the money part to the request's real cost (src/metering/meter.ts);
 * the token part is settled to the real count by the token limiter (src/limits).
 */
export interface BudgetHold {
  /** USD held. */
  amount: number;
  /** Held against the key's budget / the organization's budget. */
  key: boolean;
  org: boolean;
  /** The leases the amount was held against (absent when no USD is held). */
  leases?: BudgetLeases;
  leased?: LeasedAmount;
  /** Tokens counted in the key's window at admission (settled to the real count later). */
  tokens?: { count: number; reservation: TokenReservation };
  /** Set once a usage record carries the hold (the meter settles it then). */
  recorded?: boolean;
}
