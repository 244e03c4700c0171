/** Outbound connections made on a user's or an upstream's behalf (docs/security.md: Outbound connections). */
export { type CheckedTarget, checkTarget, type EgressPolicy, EgressRefused, egressPolicyFromEnv } from "./check";
export { type EgressOptions, egressFetch } from "./fetch";
export { type PostOptions, type PostResult, safePost } from "./post";
