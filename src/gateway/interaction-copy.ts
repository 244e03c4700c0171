/**
 * The copy of a finished Interaction kept for reads after the upstream's retention
 * expired (spec: Interactions rule 6, "a lossy fallback with structure and metadata, not
 * the original media bytes"): everything but inline media, whose base64 `data` can be
 * megabytes per output; `mime_type`, `uri` and the rest of each block stay.
 */
export function lossyCopy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(lossyCopy);
  if (value === null || typeof value !== "object") return value;
  // fromEntries defines each key, so an upstream's `__proto__` key stays a key instead of setting the prototype.
  return Object.fromEntries(Object.entries(value).flatMap(([k, v]) => (k === "data" && typeof v === "string" ? [] : [[k, lossyCopy(v)]])));
}
