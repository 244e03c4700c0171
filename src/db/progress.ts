/** Where start-up steps report that they are taking long (a logger's info, in the service). */
export type Progress = (message: string, fields?: Record<string, unknown>) => void;

/** After this long a step says what it is doing; then again every REPEAT_MS while it lasts. */
const FIRST_MS = 1000;
const REPEAT_MS = 5000;

/**
 * Runs `step`; when it takes longer than a second, says so through `progress` (once at
 * one second, then every five while it lasts, and when it is done). A quiet start stays
 * quiet, and a slow one (a first start on a busy machine) never looks hung. `announce`
 * says it at the start instead.
 */
export async function withProgress<T>(progress: Progress | undefined, what: string, step: () => Promise<T>, opts: { announce?: boolean } = {}): Promise<T> {
  if (!progress) return step();
  const started = performance.now();
  const seconds = () => Math.round((performance.now() - started) / 100) / 10;
  let said = false;
  // A step known to be long (creating a database) says so at once: much of it is
  // synchronous WebAssembly, during which no timer can fire.
  if (opts.announce) {
    progress(what);
    said = true;
  }
  const say = () => {
    progress(said ? `still ${what}` : what, said ? { seconds: seconds() } : undefined);
    said = true;
    timer = setTimeout(say, REPEAT_MS);
  };
  let timer = setTimeout(say, said ? REPEAT_MS : FIRST_MS);
  try {
    return await step();
  } finally {
    clearTimeout(timer);
    if (said) progress(`done ${what}`, { seconds: seconds() });
  }
}
