import { Code, ConnectError, createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { ApiError } from "../http/errors";

/** The sandbox a data-plane request was authenticated for (set by the router before any handler runs). */
export interface SandboxRef {
  organizationId: string;
  sandboxId: string;
}

export const SANDBOX = createContextKey<SandboxRef | undefined>(undefined, { description: "authenticated sandbox" });

/**
 * Drops a streaming response's connection without an end message: what an E2B client
 * sees when the sandbox (envd with it) dies mid-stream, and what the SDKs read as
 * "the sandbox was killed" after their health probe. Set by the router per request.
 */
export const DROP_STREAM = createContextKey<(() => void) | undefined>(undefined, { description: "drop this request's stream" });

export function sandboxOf(ctx: HandlerContext): SandboxRef {
  const ref = ctx.values.get(SANDBOX);
  if (!ref) throw new ConnectError("no sandbox for this request", Code.Unauthenticated);
  return ref;
}

const CODES: Record<number, Code> = {
  400: Code.InvalidArgument,
  401: Code.Unauthenticated,
  403: Code.PermissionDenied,
  404: Code.NotFound,
  409: Code.FailedPrecondition,
  413: Code.ResourceExhausted,
  429: Code.ResourceExhausted,
  501: Code.Unimplemented,
  502: Code.Unavailable,
  503: Code.Unavailable,
  504: Code.DeadlineExceeded,
};

/** The sandbox service's errors as Connect errors with the matching code, for unary and streaming calls alike. */
export function toConnectError(e: unknown): unknown {
  if (e instanceof ApiError) return new ConnectError(e.message, CODES[e.status] ?? Code.Internal);
  return e;
}

export const apiErrors: Interceptor = (next) => async (req) => {
  try {
    const res = await next(req);
    if (!res.stream) return res;
    const inner = res.message;
    return {
      ...res,
      message: (async function* () {
        try {
          yield* inner;
        } catch (e) {
          throw toConnectError(e);
        }
      })(),
    };
  } catch (e) {
    throw toConnectError(e);
  }
};
