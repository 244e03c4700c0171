import Ajv2020, { type ErrorObject, type ValidateFunction } from "ajv/dist/2020";
import addFormats from "ajv-formats";
import type { App } from "../../src/app";
import type { ResponseObserver } from "../../src/server";

/**
 * Every answer the test suite receives from an in-process service is checked against
 * the operation's declared response in /openapi.json: the status must be declared, the
 * media type too, and a JSON body must match the schema. A mismatch is recorded (and
 * printed) and fails the running test (./contract-preload.ts). Event streams and files
 * are checked by media type only. Operations left out of the document are not checked.
 */

export interface Mismatch {
  operation: string;
  status: number;
  problem: string;
}

const KEY = Symbol.for("gateway.test.contractMismatches");
type Registry = { mismatches: Mismatch[] };
const registry: Registry = ((globalThis as Record<symbol, unknown>)[KEY] as Registry | undefined) ?? ((globalThis as Record<symbol, unknown>)[KEY] = { mismatches: [] } as Registry);

/** Mismatches found since the last call, which empties the list. */
export function takeMismatches(): Mismatch[] {
  return registry.mismatches.splice(0);
}

interface Operation {
  id: string;
  path: string;
  literalChars: number;
  pattern: RegExp;
  /** The last parameter may hold slashes (model ids on a wildcard route). */
  loosePattern: RegExp;
  method: string;
  responses: Record<string, DeclaredResponse>;
}

interface DeclaredResponse {
  content?: Record<string, { schema?: unknown }>;
  /** The JSON pointer of the response object in the document (a shared one is under components.responses). */
  pointer: string;
}

class Contract {
  private readonly operations: Operation[] = [];
  private readonly ajv = new Ajv2020({ strict: false, allErrors: false });
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(doc: { paths: Record<string, Record<string, any>>; components?: { responses?: Record<string, any> } }) {
    addFormats(this.ajv);
    this.ajv.addSchema(doc as object, "openapi");
    for (const [path, item] of Object.entries(doc.paths)) {
      const parts = path.split(/(\{[^}]+\})/);
      const re = parts.map((p) => (p.startsWith("{") ? "([^/]+)" : escape(p))).join("");
      const lastParam = parts.map((p) => p.startsWith("{")).lastIndexOf(true);
      const loose = parts.map((p, i) => (p.startsWith("{") ? (i === lastParam ? "(.+)" : "([^/]+)") : escape(p))).join("");
      const literalChars = parts.filter((p) => !p.startsWith("{")).join("").length;
      for (const [method, op] of Object.entries(item)) {
        const responses: Record<string, DeclaredResponse> = {};
        for (const [status, res] of Object.entries<any>(op.responses ?? {})) {
          const shared = typeof res.$ref === "string" ? res.$ref.replace(/^#\/components\/responses\//, "") : undefined;
          responses[status] = shared
            ? { ...doc.components?.responses?.[shared], pointer: `openapi#/components/responses/${pointerSegment(shared)}` }
            : { ...res, pointer: `openapi#/paths/${pointerSegment(path)}/${method}/responses/${status}` };
        }
        this.operations.push({ id: op.operationId, path, literalChars, pattern: new RegExp(`^${re}$`), loosePattern: new RegExp(`^${loose}$`), method, responses });
      }
    }
    this.operations.sort((a, b) => b.literalChars - a.literalChars);
  }

  find(method: string, pathname: string): Operation | undefined {
    const m = method.toLowerCase();
    return this.operations.find((o) => o.method === m && o.pattern.test(pathname)) ?? this.operations.find((o) => o.method === m && o.loosePattern.test(pathname));
  }

  /** The problems of one answer, none when it matches. */
  async check(op: Operation, response: Response, body: string | undefined): Promise<string[]> {
    const status = String(response.status);
    const declared = op.responses[status] ?? op.responses[`${status[0]}XX`] ?? op.responses.default;
    if (!declared) return [`status ${status} is not declared (declared: ${Object.keys(op.responses).join(", ")})`];
    const type = (response.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
    const content = declared.content;
    if (!content) return body ? [`a body of type '${type}' was sent where none is declared`] : [];
    if (!type) return body ? ["a body without content-type was sent"] : [`no body where ${Object.keys(content).join(", ")} is declared`];
    const mediaKey = Object.keys(content).find((k) => k === type) ?? Object.keys(content).find((k) => k === "*/*" || (k.endsWith("/*") && type.startsWith(k.slice(0, -1))));
    if (!mediaKey) return [`content-type '${type}' is not declared (declared: ${Object.keys(content).join(", ")})`];
    if (!type.includes("json") || body === undefined) return [];
    let value: unknown;
    try {
      value = JSON.parse(body);
    } catch {
      return [`the body is not JSON: ${body.slice(0, 200)}`];
    }
    const pointer = `${declared.pointer}/content/${pointerSegment(mediaKey)}/schema`;
    let validate = this.validators.get(pointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: pointer });
      this.validators.set(pointer, validate);
    }
    if (validate(value)) return [];
    return (validate.errors ?? []).map((e) => describe(e, value));
  }
}

function describe(e: ErrorObject, value: unknown): string {
  const at = e.instancePath || "/";
  const found = JSON.stringify(at === "/" ? value : lookup(value, e.instancePath))?.slice(0, 200);
  return `at ${at}: ${e.message} (schema ${e.schemaPath}${Object.keys(e.params ?? {}).length ? ` ${JSON.stringify(e.params)}` : ""}); got ${found}`;
}

function lookup(value: unknown, pointer: string): unknown {
  let v = value as any;
  for (const seg of pointer.split("/").slice(1)) v = v?.[seg.replace(/~1/g, "/").replace(/~0/g, "~")];
  return v;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const pointerSegment = (s: string) => s.replace(/~/g, "~0").replace(/\//g, "~1");

/** Responses already checked (the asynchronous admission path dispatches a request twice). */
const checked = new WeakSet<Response>();

/** The observer for startServer: checks each answer, hands it on unchanged. */
export const contractObserver: ResponseObserver = (app: App) => {
  let contract: Promise<Contract> | undefined;
  return async (request, response) => {
    if (checked.has(response)) return response;
    const url = new URL(request.url);
    if (request.method === "OPTIONS" || request.method === "HEAD" || url.pathname === "/openapi.json") return response;
    // A sandbox's host name (`<port>-<sandboxID>.<domain>`): its answers are the sandbox's, not the document's.
    if (/^[0-9]+-sbx_/.test(request.headers.get("host") ?? "")) return response;
    contract ??= Promise.resolve(app.handle(new Request(`${url.origin}/openapi.json`))).then(async (r) => new Contract(await r.json()));
    const c = await contract;
    const op = c.find(request.method, url.pathname);
    if (!op) return response;
    const type = response.headers.get("content-type") ?? "";
    // JSON bodies are read (and handed on as a new response); streams and files are not.
    const body = type.includes("json") || !response.body ? await response.text() : undefined;
    const problems = await c.check(op, response, body);
    const out = body === undefined ? response : new Response(response.status === 204 || response.status === 304 ? null : body, { status: response.status, statusText: response.statusText, headers: response.headers });
    checked.add(out);
    for (const problem of problems) {
      const m = { operation: `${request.method} ${op.path} (${op.id})`, status: response.status, problem };
      registry.mismatches.push(m);
      console.error(`OpenAPI contract mismatch: ${m.operation} answered ${m.status}: ${problem}`);
    }
    return out;
  };
};
