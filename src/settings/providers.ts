import { httpUrl, optionalPath } from "./values";
import { custom, Invalid, matching, oneOf, optionalText } from "./variable";

/**
 * The built-in provider plugins' own variables. Plugins read them from the environment
 * they are handed (their `fromEnv`, which external plugins use for theirs); they are
 * checked here too, so a malformed one stops start-up by name like every other.
 */

/** A hosted OpenAI-compatible vendor: its key and the override of its base URL. */
const keyAndBase = (vendor: string) => ({ apiKey: optionalText(`${vendor}_API_KEY`, { secret: true }), baseUrl: httpUrl(`${vendor}_BASE_URL`) });

/** Cloud regions and locations are lowercase words joined by hyphens (us-east-1, europe-west4, global). */
const region = (name: string, example: string) => matching(name, /^[a-z0-9]+(-[a-z0-9]+)*$/, `a region such as ${example}`);

export const PROVIDER_VARIABLES = {
  openaiApiKey: optionalText("OPENAI_API_KEY", { secret: true }),
  openaiBaseUrl: httpUrl("OPENAI_BASE_URL"),
  anthropicApiKey: optionalText("ANTHROPIC_API_KEY", { secret: true }),
  anthropicBaseUrl: httpUrl("ANTHROPIC_BASE_URL"),
  geminiApiKey: optionalText("GEMINI_API_KEY", { secret: true }),
  geminiBaseUrl: httpUrl("GEMINI_BASE_URL"),
  mistral: keyAndBase("MISTRAL"),
  deepseek: keyAndBase("DEEPSEEK"),
  xai: keyAndBase("XAI"),
  groq: keyAndBase("GROQ"),
  cerebras: keyAndBase("CEREBRAS"),
  perplexity: keyAndBase("PERPLEXITY"),
  together: keyAndBase("TOGETHER"),
  fireworks: keyAndBase("FIREWORKS"),
  openrouter: keyAndBase("OPENROUTER"),
  // Local servers: the base URL alone enables them.
  ollamaBaseUrl: httpUrl("OLLAMA_BASE_URL"),
  vllmBaseUrl: httpUrl("VLLM_BASE_URL"),
  lmstudioBaseUrl: httpUrl("LMSTUDIO_BASE_URL"),
  azure: {
    endpoint: httpUrl("AZURE_OPENAI_ENDPOINT"),
    apiKey: optionalText("AZURE_OPENAI_API_KEY", { secret: true }),
    entraToken: optionalText("AZURE_OPENAI_AD_TOKEN", { secret: true }),
    apiVersion: matching("AZURE_OPENAI_API_VERSION", /^\d{4}-\d{2}-\d{2}(-preview)?$/, "an API version such as 2024-10-21 or 2025-01-01-preview"),
    // Exact words: the plugin compares the raw value.
    layout: oneOf("AZURE_OPENAI_LAYOUT", ["deployments", "v1"], "deployments"),
    deployments: matching("AZURE_OPENAI_DEPLOYMENTS", /^\s*[^\s=,]+\s*=\s*[^\s=,]+\s*(,\s*[^\s=,]+\s*=\s*[^\s=,]+\s*)*$/, "comma-separated model=deployment pairs such as gpt-4o=prod-4o,gpt-4o-mini=mini"),
  },
  bedrock: {
    accessKeyId: optionalText("AWS_ACCESS_KEY_ID"),
    secretAccessKey: optionalText("AWS_SECRET_ACCESS_KEY", { secret: true }),
    sessionToken: optionalText("AWS_SESSION_TOKEN", { secret: true }),
    region: region("AWS_REGION", "us-east-1"),
    defaultRegion: region("AWS_DEFAULT_REGION", "us-east-1"),
    baseUrl: httpUrl("BEDROCK_BASE_URL"),
  },
  vertex: {
    project: matching("VERTEX_PROJECT", /^[a-z][a-z0-9:.-]*[a-z0-9]$/, "a Google Cloud project id such as my-project-123"),
    cloudProject: matching("GOOGLE_CLOUD_PROJECT", /^[a-z][a-z0-9:.-]*[a-z0-9]$/, "a Google Cloud project id such as my-project-123"),
    serviceAccount: optionalPath("GOOGLE_APPLICATION_CREDENTIALS"),
    accessToken: optionalText("VERTEX_ACCESS_TOKEN", { secret: true }),
    location: region("VERTEX_LOCATION", "us-central1 or global"),
    cloudLocation: region("GOOGLE_CLOUD_LOCATION", "us-central1 or global"),
    tokenUri: httpUrl("VERTEX_TOKEN_URI"),
    baseUrl: httpUrl("VERTEX_BASE_URL"),
  },
  e2bApiKey: optionalText("E2B_API_KEY", { secret: true }),
  e2bDomain: optionalText("E2B_DOMAIN"),
  e2bApiUrl: httpUrl("E2B_API_URL"),
  e2bSandboxUrl: httpUrl("E2B_SANDBOX_URL"),
  // Exact words: the local plugin compares the raw value, so "OFF" must not pass here as "off".
  sandboxLocal: oneOf("SANDBOX_LOCAL", ["on", "off", "without-cgroups"], "on"),
  // The local plugin's sandbox resolver asks these (docs/sandboxes.md: Sandbox networks); default: the host's /etc/resolv.conf.
  // docs/sandboxes.md: Sandbox quotas. The local plugin's host admission: what all its sandboxes may commit, as a multiple of MemTotal.
  sandboxHostMemoryShare: custom("SANDBOX_HOST_MEMORY_SHARE", "a number above 0 such as 1.5 (the sandboxes of this host may commit that many times its memory)", (text) => {
    const n = /^(\d+(\.\d*)?|\.\d+)$/.test(text) ? Number(text) : NaN;
    if (!(n > 0)) throw new Invalid();
    return n;
  }, () => 1.5),
  sandboxDnsServers: matching("SANDBOX_DNS_SERVERS", /^\s*[0-9a-fA-F.:\[\]]+\s*(,\s*[0-9a-fA-F.:\[\]]+\s*)*$/, "a comma-separated list of DNS server addresses, each optionally with :port (127.0.0.1:5353, [::1]:53)"),
};
