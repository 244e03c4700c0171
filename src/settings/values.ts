import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { type Cidr, parseCidrList } from "../egress/ip";
import { custom, Invalid, matching, type Variable } from "./variable";

/**
 * Variables whose values are more than a number or a word: paths, URLs, origin lists,
 * address blocks, keys. Each parser refuses what it cannot use, with the reason.
 */

/** A directory path. A URL is not one: "memory://" must not become a directory named "memory:". */
export function directory(name: string, fallback: string): Variable<string> {
  const parse = (text: string) => {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) throw new Invalid("for a throwaway instance point it at a temporary directory, e.g. DATA_DIR=$(mktemp -d)");
    return resolve(text);
  };
  return custom(name, "a directory path", parse, () => resolve(fallback));
}

export function optionalPath(name: string): Variable<string | undefined> {
  return custom<string | undefined>(name, "a path", (text) => resolve(text), () => undefined);
}

/** A path that defaults to `fallback` where that exists (relative to the working directory); unset and absent: none. */
export function pathOrExisting(name: string, fallback: string): Variable<string | undefined> {
  return custom<string | undefined>(name, "a path", (text) => resolve(text), () => (existsSync(resolve(fallback)) ? resolve(fallback) : undefined));
}

/** Everything after the last "@": a URL's credentials never reach an error message. */
const withoutCredentials = (url: string) => url.split("@").pop() ?? "";

export const postgresUrl = (name: string) =>
  matching(name, /^postgres(ql)?:\/\//, "a postgres:// URL; unset it to use the embedded database", { shown: withoutCredentials });

/** The schemes Bun's Redis client takes. */
export const redisUrl = (name: string) =>
  matching(name, /^(redis|rediss|valkey|valkeys)(\+tls|\+unix|\+tls\+unix)?:\/\//, "a redis:// or rediss:// URL (or valkey://, redis+unix://, redis+tls://)", { shown: withoutCredentials });

/** An http(s) base URL (a provider's API root); a path is allowed. */
export const httpUrl = (name: string) => matching(name, /^https?:\/\/[^/\s?#]+(\/[^\s?#]*)?$/, "an http:// or https:// URL", { shown: withoutCredentials });

/** A public origin (scheme and host, no path); a trailing slash is dropped. */
export function origin(name: string): Variable<string | undefined> {
  const parse = (text: string) => {
    const value = text.replace(/\/+$/, "");
    if (!/^https?:\/\/[^/\s?#]+$/.test(value)) throw new Invalid();
    return value;
  };
  return custom<string | undefined>(name, "an origin like https://gateway.example.com", parse, () => undefined);
}

/** Which browser origins may call the API: every origin, a set of exact origins, or none. */
export type CorsOrigins = "*" | Set<string> | null;

export function corsOrigins(name: string): Variable<CorsOrigins> {
  const parse = (value: string): CorsOrigins => {
    if (value === "" || value.toLowerCase() === "none") return null;
    if (value === "*") return "*";
    const origins = new Set<string>();
    for (const part of value.split(",")) {
      const one = part.trim().replace(/\/+$/, "");
      if (!one) continue;
      if (!/^https?:\/\/[^/?#\s]+$/i.test(one)) throw new Invalid(`"${part.trim()}" is not an origin`);
      origins.add(one.toLowerCase());
    }
    return origins.size ? origins : null;
  };
  // Blank is a value here (no origin), unlike unset (every origin).
  return custom(name, "*, none, or a comma-separated list of origins such as https://app.example.com", parse, () => "*", { keepBlank: true });
}

export function cidrList(name: string): Variable<Cidr[]> {
  const parse = (text: string) => {
    try {
      return parseCidrList(text);
    } catch (e) {
      throw new Invalid((e as Error).message);
    }
  };
  return custom(name, "a comma-separated list of address blocks such as 10.0.0.0/8,fd00::/8", parse, () => []);
}

const SECRETS_KEY_FORMS = "32 bytes as 64 hex characters or base64 (e.g. `openssl rand -hex 32`)";

/** Decodes a 32-byte key given as hex or base64; undefined when it is neither. */
export function decodeKey(raw: string): Uint8Array | undefined {
  const v = raw.trim();
  const bytes = /^[0-9a-fA-F]{64}$/.test(v) ? Buffer.from(v, "hex") : /^[A-Za-z0-9+/]{43}=?$/.test(v) ? Buffer.from(v, "base64") : undefined;
  return bytes && bytes.length === 32 ? new Uint8Array(bytes) : undefined;
}

export function secretKey(name: string): Variable<Uint8Array | undefined> {
  const parse = (text: string) => {
    const key = decodeKey(text);
    if (!key) throw new Invalid();
    return key;
  };
  return custom<Uint8Array | undefined>(name, SECRETS_KEY_FORMS, parse, () => undefined, { secret: true });
}

/** `host` or `host:port` (a base domain such as sandbox.example.com or localhost:8443), lower-cased. */
export function hostAndPort(name: string): Variable<string | undefined> {
  const parse = (text: string) => {
    const value = text.toLowerCase().replace(/\.$/, "");
    if (!/^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(:[0-9]{1,5})?$/.test(value)) throw new Invalid();
    return value;
  };
  return custom<string | undefined>(name, "a domain name, optionally with a port (sandbox.example.com, localhost:8443)", parse, () => undefined);
}

/** The package managers an environment's `packages` name. */
export const PACKAGE_MANAGERS = ["apt", "cargo", "gem", "go", "npm", "pip"] as const;
export type PackageManager = (typeof PACKAGE_MANAGERS)[number];

/** `manager=url` pairs: where each package manager installs from (an index, a registry, a mirror). */
export function packageRegistries(name: string): Variable<Partial<Record<PackageManager, string>>> {
  const parse = (text: string) => {
    const out: Partial<Record<PackageManager, string>> = {};
    for (const part of text.split(",")) {
      if (!part.trim()) continue;
      const [manager, url, extra] = part.split("=").map((x) => x.trim());
      if (!(PACKAGE_MANAGERS as readonly string[]).includes(manager) || !url || extra !== undefined) throw new Invalid(`"${part.trim()}" is not manager=url`);
      if (!/^https?:\/\/[^/\s?#@]+(\/[^\s?#]*)?$/.test(url)) throw new Invalid(`"${url}" is not an http(s) URL`);
      out[manager as PackageManager] = url;
    }
    return out;
  };
  return custom(name, `comma-separated manager=url pairs (managers: ${PACKAGE_MANAGERS.join(", ")}), such as pip=https://pypi.example/simple,npm=https://npm.example/`, parse, () => ({}));
}
