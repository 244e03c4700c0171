/**
 * Label values that stay a bounded set whatever clients send.
 * Threat: a label fed from client input (a model name through `<provider>/<any id>`, a
 * new organization per sign-up) creates one time series per distinct value; a few
 * thousand of them make every scrape large and slow and grow the process's memory for
 * good. The first `cap` distinct values keep their name, later ones are counted as
 * `other`, and a value longer than MAX_LENGTH is never a label.
 */
export class CappedLabel {
  private readonly seen = new Set<string>();

  constructor(private readonly cap: number) {}

  of(value: string | undefined): string {
    if (!value) return "none";
    if (this.seen.has(value)) return value;
    if (this.seen.size >= this.cap || value.length > MAX_LENGTH) return "other";
    this.seen.add(value);
    return value;
  }
}

const MAX_LENGTH = 128;

const FAMILIES = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/** `2xx`, `4xx`, ...: a status family is a label, the exact status is not. */
export function statusClass(status: number): string {
  return status >= 100 && status < 600 ? FAMILIES[Math.floor(status / 100) - 1] : "other";
}
