import { useEffect, useRef } from "preact/hooks";

/**
 * Calls `tick` every `ms` while the page is shown and the tab visible (a hidden tab asks
 * the service nothing), and once when the tab comes back. The latest `tick` is called,
 * so it may close over the latest state.
 */
export function useEvery(ms: number, tick: () => void, active = true): void {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => {
    if (!active) return;
    const run = () => document.visibilityState === "visible" && latest.current();
    const timer = setInterval(run, ms);
    document.addEventListener("visibilitychange", run);
    return () => {
      clearInterval(timer);
      document.removeEventListener("visibilitychange", run);
    };
  }, [ms, active]);
}
