import { builtinPlugins } from "../../providers";

/**
 * What to tell someone whose gateway has no provider for what they asked: a fresh
 * `npm start` serves no model until a provider key is set, and "model not found" or an
 * empty model list does not say so.
 */

/** The variable that enables each built-in vendor provider with no other configuration (their plugins' `enabledBy`). */
const VENDOR_KEY_VARIABLE: Record<string, string> = Object.fromEntries(builtinPlugins.flatMap((p) => (p.kind === "model" && p.enabledBy ? [[p.name, p.enabledBy]] : [])));

/** The three the hint for an empty gateway names; docs/configuration.md lists every variable. */
const FIRST_VARIABLES = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"];

/** For a catalog vendor that no configured provider serves. */
export function vendorProviderHint(vendor: string): string {
  const variable = VENDOR_KEY_VARIABLE[vendor];
  return variable
    ? `no provider configured for vendor ${vendor}; set ${variable}`
    : `no provider configured for vendor ${vendor}; add one under "providers" in CONFIG_FILE (e.g. an OpenAI-compatible server with "vendor": "${vendor}")`;
}

/** For a gateway with no model provider at all. */
export const NO_PROVIDER_HINT = `no model provider is configured: set ${FIRST_VARIABLES.join(", ")} or another vendor's key (docs/providers.md), or add providers in CONFIG_FILE, and restart`;
