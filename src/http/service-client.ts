/**
 * The CLI's calls to a running service (`gateway templates ...`, `gateway mcp ...`): JSON in
 * and out with an organization's key. A refusal becomes an Error naming the call, its status
 * and the answer's own message, whichever error shape the surface answers in.
 */
export type ServiceApi = (method: string, path: string, body?: unknown) => Promise<any>;

export function serviceClient(base: string, key: string): ServiceApi {
  const root = base.replace(/\/+$/, "");
  return async (method, path, body) => {
    const res = await fetch(root + path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).catch((e) => {
      throw new Error(`cannot reach the service at ${root}: ${e instanceof Error ? e.message : e}`);
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${answerMessage(text)}`);
    return text ? JSON.parse(text) : null;
  };
}

/** The message of an error answer: E2B's `message`, the flat family's `error`, or the others' `error.message`; else the text, clipped. */
export function answerMessage(text: string): string {
  try {
    const json = JSON.parse(text) as { message?: unknown; error?: unknown };
    const nested = typeof json.error === "object" && json.error !== null ? (json.error as { message?: unknown }).message : undefined;
    for (const m of [json.message, json.error, nested]) if (typeof m === "string" && m) return m;
  } catch {
    // not JSON: the text itself
  }
  return text.slice(0, 500);
}
