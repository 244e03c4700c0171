import { leasesFor, ORG_SPEND_MESSAGE, orgBudgetsFor } from "../budgets";
import type { BudgetHold } from "../budgets/hold";
import { catalogFor } from "../catalog";
import { AUTH_MESSAGES } from "../http/auth";
import { ApiError } from "../http/errors";
import { tokenLimiterOf, tokensRefused } from "../limits";
import type { Services } from "../services";
import type { Call } from "./forward";
import { protocolSpec } from "./protocols";

/**
 * Output tokens assumed for a request that names no maximum, on a model whose output limit
 * the catalog does not know.
 */
const DEFAULT_MAX_OUTPUT = 16_384;

/**
 * Admission of a model request against what its key and organization may still spend and
 * the key's tokens per minute: before it is forwarded, its maximum cost (the input
 * estimated from the request, plus `max_tokens` or the model's output limit, at the dearest
 * of its candidates' prices) is held against every budget with a limit, and its maximum
 * tokens are counted in the key's token window, each atomically (src/budgets/leases.ts,
 * src/limits). The money is held against the slice of each budget this process leased, in
 * memory: a database round trip only when the slice runs out. The request is refused with the surface's status when either does not fit.
 * The usage record settles both to the real usage; a request that fails unrecorded drops
 * them. Overspend is then bounded by the estimate's error, not by how many requests run at
 * once. Keys and organizations without limits pay nothing here.
 *
 * Threat: concurrent requests each passing a check of the spend written so far (50 of 50
 * admitted against a budget that fits one).
 */
export async function admit(s: Services, call: Call): Promise<BudgetHold | undefined> {
  if (!limited(s, call)) return undefined;
  const c0 = call.candidates[0];
  const text = c0 ? call.body(c0) : undefined;
  if (text === undefined) return undefined; // a read: nothing is generated
  const input = Math.ceil(Buffer.byteLength(text) / 3); // generous: the hold is a maximum
  return admitTokens(s, call, input, maxOutput(parse(text)));
}

/** The part of a call admission looks at (a Realtime response is admitted without a Call). */
export type Admitted = Pick<Call, "auth" | "candidates" | "publicModel" | "protocol">;

/** Whether the call's key or organization has anything admission must hold against. */
function limited(s: Services, call: Admitted): boolean {
  const key = call.auth.key;
  if (key.spendingLimit !== null || (key.tpm ?? 0) > 0) return true;
  const org = orgBudgetsFor(s).get(call.auth.organizationId);
  return !!org && org.spendingLimit !== null;
}

/**
 * Holds `input` tokens plus `output` (or the model's output limit when unknown) against the
 * key's token window and the key's and organization's budgets; undefined when nothing is limited.
 */
export async function admitTokens(s: Services, call: Admitted, input: number, output: number | undefined): Promise<BudgetHold | undefined> {
  if (!limited(s, call)) return undefined;
  const key = call.auth.key;
  const tpm = key.tpm ?? 0;
  const org = orgBudgetsFor(s).get(call.auth.organizationId);
  const keyLimited = key.spendingLimit !== null;
  const orgLimited = !!org && org.spendingLimit !== null;
  const limiter = tpm > 0 ? tokenLimiterOf(s) : undefined;
  const c0 = call.candidates[0];
  const catalog = catalogFor(s);
  output ??= catalog.get(c0?.model ?? call.publicModel)?.maxOutputTokens ?? catalog.get(call.publicModel)?.maxOutputTokens ?? DEFAULT_MAX_OUTPUT;
  const hold: BudgetHold = { amount: 0, key: false, org: false };
  if (limiter) {
    const count = input + output;
    const r = await limiter.reserve(key.id, tpm, count);
    if (r.wait > 0) throw tokensRefused(r.wait);
    hold.tokens = { count, reservation: r };
  }
  if (keyLimited || orgLimited) {
    let amount = 0;
    for (const model of new Set([call.publicModel, ...call.candidates.map((c) => c.model)])) {
      amount = Math.max(amount, catalog.cost(model, { inputTokens: input, outputTokens: output }) ?? 0);
    }
    if (amount > 0) {
      let refused: "key" | "org" | null;
      const leases = leasesFor(s);
      try {
        refused = await leases.hold({ keyId: key.id, orgId: call.auth.organizationId, key: keyLimited, org: orgLimited, amount, keyLimit: key.spendingLimit, orgLimit: org?.spendingLimit });
      } catch (err) {
        release(s, call, hold);
        throw err;
      }
      if (refused) {
        release(s, call, hold);
        if (refused === "key") throw new ApiError(protocolSpec(call.protocol).spendLimitStatus, AUTH_MESSAGES.spend, { code: "spending_limit_exceeded" });
        throw new ApiError(402, ORG_SPEND_MESSAGE, { code: "spending_limit_exceeded" });
      }
      hold.amount = amount;
      hold.key = keyLimited;
      hold.org = orgLimited;
      hold.leases = leases;
      hold.leased = { amount, key: keyLimited ? key.id : undefined, org: orgLimited ? call.auth.organizationId : undefined };
    }
  }
  return hold;
}

/** Gives back what a request held when no usage record will carry it (it failed before being recorded). */
export function release(s: Services, call: Pick<Call, "auth">, hold: BudgetHold): void {
  if (hold.recorded) return;
  hold.recorded = true;
  if (hold.tokens) tokenLimiterOf(s)?.settle(call.auth.key.id, hold.tokens.reservation, -hold.tokens.count);
  if (hold.leased) hold.leases?.released(hold.leased);
}

/** The request's own cap on generated tokens, in whichever protocol's spelling. */
function maxOutput(b: any): number | undefined {
  if (!b || typeof b !== "object") return undefined;
  const v = b.max_tokens ?? b.max_completion_tokens ?? b.max_output_tokens ?? b.generationConfig?.maxOutputTokens ?? b.generation_config?.max_output_tokens;
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? v : undefined;
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
