import { ConfigError, type Settings } from "../settings";

/**
 * The OpenTelemetry exporter settings, read from the standard variables
 * (https://opentelemetry.io/docs/specs/otel/protocol/exporter/): tracing is off unless an
 * OTLP endpoint is set, and OTEL_SDK_DISABLED=true turns it off whatever else is set.
 */
export interface OtlpSettings {
  /** Full URL the spans are POSTed to. */
  url: string;
  headers: Record<string, string>;
  serviceName: string;
}

export function otlpSettings(o: Settings["observability"]): OtlpSettings | undefined {
  if (o.otelSdkDisabled) return undefined;
  if ((o.otelTracesExporter ?? "").trim().toLowerCase() === "none") return undefined;
  const own = o.otlpTracesEndpoint?.trim();
  const base = o.otlpEndpoint?.trim();
  // The signal-specific variable is the whole URL; the general one is a base to which the
  // signal's path is added (the specification's rule).
  const url = own || (base ? base.replace(/\/+$/, "") + "/v1/traces" : undefined);
  if (!url) return undefined;
  checkUrl(url, own ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT");
  return {
    url,
    headers: { ...parseHeaders(o.otlpHeaders, "OTEL_EXPORTER_OTLP_HEADERS"), ...parseHeaders(o.otlpTracesHeaders, "OTEL_EXPORTER_OTLP_TRACES_HEADERS") },
    serviceName: o.otelServiceName.trim() || "gateway",
  };
}

function checkUrl(url: string, name: string): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError(`${name} is not a URL (${JSON.stringify(url)}): set it to the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new ConfigError(`${name} must be an http:// or https:// URL (OTLP over HTTP), not ${u.protocol}`);
}

/** `key1=value1,key2=value2`, values percent-encoded (the specification's format). */
export function parseHeaders(text: string | undefined, name: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!text?.trim()) return out;
  for (const part of text.split(",")) {
    const eq = part.indexOf("=");
    const key = eq > 0 ? part.slice(0, eq).trim() : "";
    if (!key) throw new ConfigError(`${name}: "${part.trim()}" is not key=value (expected key1=value1,key2=value2)`);
    try {
      out[key.toLowerCase()] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      throw new ConfigError(`${name}: the value of ${key} has malformed percent-encoding`);
    }
  }
  return out;
}
