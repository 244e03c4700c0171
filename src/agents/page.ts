import { ApiError } from "../http/errors";
import { isWellFormedId } from "../ids";

/** SDK list shape (PageCursor): `data` plus an opaque `next_page` cursor, null on the last page. */
export interface Page<T> {
  data: T[];
  next_page: string | null;
  /** Sessions use the bidirectional cursor of the SDK; backwards paging is not offered (always null). */
  prev_page?: string | null;
}

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;

export function limitOf(limit: number | undefined): number {
  return limit ?? DEFAULT_LIMIT;
}

/** A cursor is the id of the last item of the previous page (ids sort by creation time). */
export function idCursor(page: string | undefined, prefix: string): string | undefined {
  if (page === undefined || page === "") return undefined;
  if (!isWellFormedId(page, prefix)) throw new ApiError(400, "invalid page cursor");
  return page;
}

/** Rows were fetched with limit + 1: the extra row only says there is another page. */
export function pageOf<R, T>(rows: R[], limit: number, map: (r: R) => T, cursorOf: (r: R) => string): Page<T> {
  const more = rows.length > limit;
  const items = more ? rows.slice(0, limit) : rows;
  return { data: items.map(map), next_page: more ? cursorOf(items[items.length - 1]) : null };
}

export const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** Metadata patch (SDK update params): a null value deletes the key, others set it. */
export function mergeMetadata(current: Record<string, string>, patch: Record<string, string | null> | null | undefined): Record<string, string> {
  if (patch === undefined) return current;
  if (patch === null) return {};
  // A Map, so a `__proto__` key is a key like any other (assigning it on an object would set the prototype).
  const out = new Map(Object.entries(current));
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) out.delete(k);
    else out.set(k, v);
  }
  return Object.fromEntries(out);
}

/** Array query parameters as the SDK sends them (`statuses[]=a&statuses[]=b`), plain repeats accepted too. */
export function arrayParam(request: Request, name: string): string[] {
  const q = new URL(request.url).searchParams;
  return [...q.getAll(`${name}[]`), ...q.getAll(name)].flatMap((v) => v.split(",")).filter(Boolean);
}

/** `created_at[gte]` and friends, as the SDK sends them (bracketed names do not fit a TypeBox query object). */
export function dateParam(request: Request, name: string): Date | undefined {
  const v = new URL(request.url).searchParams.get(name);
  if (v === null) return undefined;
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) throw new ApiError(400, `${name} must be an RFC 3339 timestamp`);
  return d;
}
