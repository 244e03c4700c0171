import type { Services } from "./services";

/** Where the scheduler, the deployment API, budgets and the usage meter read "now". Tests swap it to move time at will. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

const clocks = new WeakMap<Services, Clock>();

export function clockOf(s: Services): Clock {
  return clocks.get(s) ?? systemClock;
}

/** Replaces the clock of one service instance (tests: a controllable clock). */
export function setClock(s: Services, clock: Clock): void {
  clocks.set(s, clock);
}
