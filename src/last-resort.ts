import { AsyncLocalStorage } from "node:async_hooks";
import type { Logger } from "./log";

/**
 * The last line of defence: an error nothing caught (a throw in a timer or stream
 * callback, a rejected promise nobody awaited) is logged, with the id of the request
 * it came from when that is known, and the process keeps serving. Threat: one request
 * or one client (a disconnect at the wrong moment) ending the process for every
 * tenant. Such an error is still a bug: the log line says where to look.
 */
const requests = new AsyncLocalStorage<string>();

/** Marks the rest of this request's work (timers, callbacks, streams it starts) with its id. */
export function enterRequest(requestId: string): void {
  requests.enterWith(requestId);
}

const loggers = new Set<Logger>();

const report = (kind: string) => (err: unknown) => {
  // The id travels with thrown errors' async context; rejections lose it in Bun.
  const requestId = requests.getStore();
  for (const log of loggers) {
    log.error(`${kind} (the process keeps serving; this is a bug)`, { requestId, err: err instanceof Error ? err : { value: String(err) } });
    log.flush();
  }
};
const onException = report("uncaught exception");
const onRejection = report("unhandled promise rejection");

/** Installs the guard while a service runs (logged through each running service's logger); returns its removal. */
export function installLastResort(log: Logger): () => void {
  if (!loggers.size) {
    process.on("uncaughtException", onException);
    process.on("unhandledRejection", onRejection);
  }
  loggers.add(log);
  return () => {
    if (!loggers.delete(log) || loggers.size) return;
    process.off("uncaughtException", onException);
    process.off("unhandledRejection", onRejection);
  };
}
