/**
 * What a model request adds to its access-log line: the model, the provider that
 * answered, how many candidates were tried, tokens and cost. The gateway notes it on the
 * request; the access log reads it. A stream's usage is known only when it ends, so its
 * line waits for that (`finish`), instead of being written when the headers go out.
 */
export interface ModelAccess {
  model: string;
  provider?: string;
  attempts: number;
  inputTokens?: number;
  outputTokens?: number;
  costUsd?: number;
  /** True while a stream is still flowing: the line is written by `end`. */
  open: boolean;
  /** Set by the access log when it deferred the line to the end of the stream. */
  deferred?: (status: number) => void;
}

const byRequest = new WeakMap<Request, ModelAccess>();

export function noteModelAccess(request: Request, access: ModelAccess): void {
  byRequest.set(request, access);
}

export function modelAccessOf(request: Request): ModelAccess | undefined {
  return byRequest.get(request);
}

/** The stream ended (or failed): the deferred line, if any, is written now with the final usage. */
export function endModelAccess(request: Request, status: number): void {
  const a = byRequest.get(request);
  if (!a) return;
  a.open = false;
  const write = a.deferred;
  a.deferred = undefined;
  write?.(status);
}

/** The extra JSON members of the access-log line (leading comma); model and provider names escaped. */
export function modelAccessFields(a: ModelAccess): string {
  let s = `,"model":${JSON.stringify(a.model)},"attempts":${a.attempts}`;
  if (a.provider) s += `,"provider":${JSON.stringify(a.provider)}`;
  if (a.inputTokens !== undefined) s += `,"inputTokens":${a.inputTokens},"outputTokens":${a.outputTokens ?? 0}`;
  if (a.costUsd !== undefined) s += `,"costUsd":${a.costUsd}`;
  return s;
}
