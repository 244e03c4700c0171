/**
 * Threat: a server that echoes what it was sent (a debugging tool, an error page quoting
 * the request) would hand the organization's stored credentials to every key allowed one
 * of its tools. Every value the gateway sent it is cut out of what comes back.
 */
export function scrub<T>(value: T, secrets: string[]): T {
  const text = JSON.stringify(value);
  const cleaned = scrubText(text, secrets);
  return cleaned === text ? value : (JSON.parse(cleaned) as T);
}

export function scrubText(text: string, secrets: string[]): string {
  let out = text;
  for (const secret of secrets) {
    // Too short to be a credential, and cutting it would mangle ordinary text.
    if (secret.length < 6) continue;
    for (const form of [secret, JSON.stringify(secret).slice(1, -1)]) if (out.includes(form)) out = out.split(form).join("[redacted]");
  }
  return out;
}
