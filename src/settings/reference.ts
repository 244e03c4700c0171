/**
 * The configuration reference: for each environment variable the settings module reads, its
 * documented default and meaning, in the groups of docs/configuration.md. What a variable
 * accepts comes from its parser (./variable.ts). scripts/generate-config-docs.ts writes the
 * table from this; test/foundation/settings.test.ts keeps the two and the settings exact,
 * so a new variable cannot ship undocumented.
 */

export interface SettingDoc {
  /** The default as the reader should see it (markdown). */
  default: string;
  /** What it does (markdown, one table cell). */
  meaning: string;
}

export interface SettingGroup {
  title: string;
  /** Links to the guides that explain the group (markdown, relative to docs/). */
  see?: string;
  variables: Record<string, SettingDoc>;
}

export const SETTING_GROUPS: SettingGroup[] = [
  {
    title: "Service",
    variables: {
      PORT: { default: "`8080`", meaning: "Listening port (`0` = any free port)" },
      HOST: { default: "`0.0.0.0`", meaning: "Listening address" },
      DATA_DIR: { default: "`./data`", meaning: "Directory for the embedded database (`DATA_DIR/pg`), sandboxes and other local state (a path; for a throwaway instance use a temporary directory). Created owner-only (0700; the database files and `secrets.key` 0600), and an existing one is tightened that way at every start" },
      DATABASE_URL: { default: "unset", meaning: "`postgres://...` uses a real PostgreSQL server instead of the embedded PGlite. Both run the same migrations at start-up" },
      PGLITE_THREAD: { default: "`false`", meaning: "`true` runs the embedded database on a thread of its own instead of the service's: HTTP latency stays steadier under write load (the database's garbage-collection pauses leave the HTTP thread), and a second core does the database work, but every statement crosses threads, which costs more than it saves on a 2-core machine (docs/benchmarks.md)" },
      ADMIN_TOKEN: { default: "unset", meaning: "Enables the admin REST API under `/admin` (404 when unset)" },
      KEY_CACHE_RESYNC_MS: { default: "`5000`", meaning: "How often each process re-reads changed key rows, the safety net behind change notifications (see [Organizations and API keys](organizations.md#organizations-and-api-keys))" },
      KEY_CACHE_LISTEN: { default: "`true`", meaning: "`false` where PostgreSQL's LISTEN cannot work (a transaction-pooling proxy such as PgBouncer in transaction mode): key changes from other processes then arrive only with the poll, so lower `KEY_CACHE_RESYNC_MS` too" },
      PLUGINS_DIR: { default: "`./plugins` when it exists", meaning: "Directory of extra provider plugins (`.ts`/`.js`), loaded at start-up; one named here must exist" },
      CONFIG_FILE: { default: "unset", meaning: "JSON file with structured configuration (providers, model routes; see [CONFIG_FILE](providers.md#config_file-providers-routes-gateway-options))" },
      CORS_ORIGINS: { default: "`*`", meaning: "Browser origins allowed to call the API: `*` (any), a comma-separated list of exact origins (`https://app.example.com,http://localhost:5173`), or `none`. A preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered `204` (with its `X-Request-ID`) before authentication, allowing the headers it asks for (`authorization`, `x-api-key`, `x-stainless-*`, `anthropic-*`, `x-goog-*`, ...); responses to an allowed origin carry `Access-Control-Allow-Origin` and expose `x-request-id` and `location`. Credentials are never cookies, so `*` lends a page no authority it does not already hold; the admin API gets no CORS headers" },
      PUBLIC_URL: { default: "request origin", meaning: "Origin of the URLs the service hands out (generation polling and outputs, endpoint URLs), e.g. `https://gw.example.com`" },
      LOG_LEVEL: { default: "`info`", meaning: "`debug`, `info`, `warn`, `error` or `silent`. Logs are JSON lines on stdout, with the request id. At `info`, one access-log line per request (`msg: \"request\"`: method, path, status, `durationMs`, organization), written when the response (for a stream: its status and headers) is decided" },
      BOOTSTRAP: { default: "`true`", meaning: "`false` stops the first start from creating organization `default` and a key" },
      BODY_LIMIT_BYTES: { default: "`10485760`", meaning: "Largest request body (the spec's 10 MB)" },
      GATEWAY_ALLOCATOR_TUNING: { default: "`on`", meaning: "`off` keeps the memory allocator's defaults (see [Memory](operations.md#memory))" },
      MIMALLOC_PURGE_DELAY: { default: "`-1` under `serve`", meaning: "How long Bun's allocator (mimalloc) waits before giving freed memory back to the operating system; `-1` never. Set it yourself (an integer; mimalloc's own default is `100` ms) to trade throughput for a smaller resident size when idle" },
    },
  },
  {
    title: "Model providers",
    see: "[Providers](providers.md#providers-and-zero-configuration)",
    variables: {
      OPENAI_API_KEY: { default: "unset", meaning: "Enables provider `openai`" },
      OPENAI_BASE_URL: { default: "`https://api.openai.com/v1`", meaning: "Its API root, with `/v1` (any OpenAI-compatible server)" },
      ANTHROPIC_API_KEY: { default: "unset", meaning: "Enables provider `anthropic`" },
      ANTHROPIC_BASE_URL: { default: "`https://api.anthropic.com`", meaning: "Its API root, without `/v1`" },
      GEMINI_API_KEY: { default: "unset", meaning: "Enables provider `gemini`" },
      GEMINI_BASE_URL: { default: "`https://generativelanguage.googleapis.com`", meaning: "Its API root, without the version" },
      MISTRAL_API_KEY: { default: "unset", meaning: "Enables provider `mistral` (OpenAI-compatible)" },
      MISTRAL_BASE_URL: { default: "`https://api.mistral.ai/v1`", meaning: "Its API root, with the version segment" },
      DEEPSEEK_API_KEY: { default: "unset", meaning: "Enables provider `deepseek` (OpenAI-compatible)" },
      DEEPSEEK_BASE_URL: { default: "`https://api.deepseek.com/v1`", meaning: "Its API root, with the version segment" },
      XAI_API_KEY: { default: "unset", meaning: "Enables provider `xai` (OpenAI-compatible)" },
      XAI_BASE_URL: { default: "`https://api.x.ai/v1`", meaning: "Its API root, with the version segment" },
      GROQ_API_KEY: { default: "unset", meaning: "Enables provider `groq` (OpenAI-compatible)" },
      GROQ_BASE_URL: { default: "`https://api.groq.com/openai/v1`", meaning: "Its API root, with the version segment" },
      CEREBRAS_API_KEY: { default: "unset", meaning: "Enables provider `cerebras` (OpenAI-compatible)" },
      CEREBRAS_BASE_URL: { default: "`https://api.cerebras.ai/v1`", meaning: "Its API root, with the version segment" },
      PERPLEXITY_API_KEY: { default: "unset", meaning: "Enables provider `perplexity` (OpenAI-compatible)" },
      PERPLEXITY_BASE_URL: { default: "`https://api.perplexity.ai`", meaning: "Its API root, with the version segment" },
      TOGETHER_API_KEY: { default: "unset", meaning: "Enables provider `together` (OpenAI-compatible)" },
      TOGETHER_BASE_URL: { default: "`https://api.together.xyz/v1`", meaning: "Its API root, with the version segment" },
      FIREWORKS_API_KEY: { default: "unset", meaning: "Enables provider `fireworks` (OpenAI-compatible)" },
      FIREWORKS_BASE_URL: { default: "`https://api.fireworks.ai/inference/v1`", meaning: "Its API root, with the version segment" },
      OPENROUTER_API_KEY: { default: "unset", meaning: "Enables provider `openrouter` (OpenAI-compatible)" },
      OPENROUTER_BASE_URL: { default: "`https://openrouter.ai/api/v1`", meaning: "Its API root, with the version segment" },
      OLLAMA_BASE_URL: { default: "unset", meaning: "Enables provider `ollama` at this API root, with `/v1` (e.g. `http://127.0.0.1:11434/v1`; no key)" },
      VLLM_BASE_URL: { default: "unset", meaning: "Enables provider `vllm` at this API root, with `/v1` (e.g. `http://127.0.0.1:8000/v1`; no key)" },
      LMSTUDIO_BASE_URL: { default: "unset", meaning: "Enables provider `lmstudio` at this API root, with `/v1` (e.g. `http://127.0.0.1:1234/v1`; no key)" },
      AZURE_OPENAI_ENDPOINT: { default: "unset", meaning: "With `AZURE_OPENAI_API_KEY` or `AZURE_OPENAI_AD_TOKEN`, enables provider `azure` at this resource URL" },
      AZURE_OPENAI_API_KEY: { default: "unset", meaning: "Sent as `api-key`" },
      AZURE_OPENAI_AD_TOKEN: { default: "unset", meaning: "Entra ID bearer token, instead of the key" },
      AZURE_OPENAI_DEPLOYMENTS: { default: "unset", meaning: "`model=deployment` pairs, comma-separated (`gpt-4o=prod-4o,gpt-4o-mini=mini`): the public models this instance serves" },
      AZURE_OPENAI_API_VERSION: { default: "`2024-10-21`", meaning: "`api-version` of the deployments layout" },
      AZURE_OPENAI_LAYOUT: { default: "`deployments`", meaning: "`v1` for the `/openai/v1/` surface (deployment sent as `model`)" },
      AWS_ACCESS_KEY_ID: { default: "unset", meaning: "With `AWS_SECRET_ACCESS_KEY` and a region, enables provider `bedrock`" },
      AWS_SECRET_ACCESS_KEY: { default: "unset", meaning: "Signs Bedrock requests (SigV4)" },
      AWS_SESSION_TOKEN: { default: "unset", meaning: "Temporary credentials' session token" },
      AWS_REGION: { default: "unset", meaning: "Bedrock's region, e.g. `us-east-1`" },
      AWS_DEFAULT_REGION: { default: "unset", meaning: "Used when `AWS_REGION` is unset" },
      BEDROCK_BASE_URL: { default: "`https://bedrock-runtime.<region>.amazonaws.com`", meaning: "Bedrock runtime API root" },
      VERTEX_PROJECT: { default: "unset", meaning: "With credentials, enables provider `vertex` for this Google Cloud project" },
      GOOGLE_CLOUD_PROJECT: { default: "unset", meaning: "Used when `VERTEX_PROJECT` is unset" },
      GOOGLE_APPLICATION_CREDENTIALS: { default: "unset", meaning: "Service-account key file (JSON) Vertex tokens are obtained with" },
      VERTEX_ACCESS_TOKEN: { default: "unset", meaning: "An OAuth access token, instead of a service account" },
      VERTEX_LOCATION: { default: "`us-central1`", meaning: "Vertex location (`global`, `europe-west4`, ...)" },
      GOOGLE_CLOUD_LOCATION: { default: "unset", meaning: "Used when `VERTEX_LOCATION` is unset" },
      VERTEX_TOKEN_URI: { default: "the key's `token_uri`", meaning: "Where the service account's assertion is exchanged for a token" },
      VERTEX_BASE_URL: { default: "`https://<location>-aiplatform.googleapis.com`", meaning: "Vertex API root" },
    },
  },
  {
    title: "Limits and metering",
    see: "[Model catalog, usage metering, spending and rate limits](gateway.md#model-catalog-usage-metering-spending-and-rate-limits)",
    variables: {
      RATE_LIMIT_RPM: { default: "`0` (no cap)", meaning: "Platform-wide requests per minute over all keys" },
      REDIS_URL: { default: "unset", meaning: "`redis://` or `rediss://`: shares the rate-limit windows between service processes through Redis/Valkey (in-process when unset)" },
      REDIS_KEY_PREFIX: { default: "`gateway:`", meaning: "Prefix of the Redis keys (several deployments on one Redis)" },
      USAGE_FLUSH_MS: { default: "`250`", meaning: "How often queued usage rows are written" },
      REQUEST_LOG_RETENTION_DAYS: { default: "`30`", meaning: "Request-log rows older than this leave the log (their totals stay, summed per hour); `0` keeps every row" },
      REQUEST_LOG_PRUNE_MS: { default: "`3600000`", meaning: "How often old request-log rows are pruned (also at start)" },
      REQUEST_LOG_BODIES: { default: "`false`", meaning: "`true` stores each request's JSON as sent upstream and each non-streamed answer, clipped. Off by default: prompts are the tenants' data" },
      REQUEST_LOG_BODY_CHARS: { default: "`4096`", meaning: "Characters of each body kept with `REQUEST_LOG_BODIES`" },
    },
  },
  {
    title: "Sandboxes",
    see: "[Templates and backends](sandboxes.md#templates-and-backends)",
    variables: {
      SANDBOX_LOCAL: { default: "`on`", meaning: "`off` disables the local (bubblewrap) backend; `without-cgroups` runs it without per-sandbox cgroups" },
      SANDBOX_REAPER_INTERVAL_MS: { default: "`1000`", meaning: "How often sandboxes past their timeout are stopped" },
      SANDBOX_ORG_MAX_SANDBOXES: { default: "`50`", meaning: "Running and paused sandboxes per organization (default quota; see [Sandbox quotas](sandboxes.md#sandbox-quotas))" },
      SANDBOX_ORG_MAX_MEMORY_MB: { default: "`65536`", meaning: "Total memory (MB) of an organization's running and paused sandboxes (default quota)" },
      SANDBOX_ORG_MAX_CPUS: { default: "`50`", meaning: "Total CPUs of an organization's running and paused sandboxes (default quota)" },
      SANDBOX_HOST_MEMORY_SHARE: { default: "`1.5`", meaning: "Host admission of the local backend: its sandboxes' memory limits may add up to this many times the host's `MemTotal` (above 1: overcommit, as limits are ceilings, not use); a create past it is refused with 503. See [Sandbox quotas](sandboxes.md#sandbox-quotas)" },
      SANDBOX_NETWORK: { default: "`none`", meaning: "The network of a new sandbox when neither the create nor its template says: `none` (loopback only) or `internet` (public addresses, under the egress deny ranges); `off`: no sandbox gets a network, and asking for one is a 400. See [Sandbox networks](sandboxes.md#sandbox-networks)" },
      SANDBOX_DNS_SERVERS: { default: "the host's `/etc/resolv.conf`", meaning: "DNS servers the sandboxes' resolvers ask (`10.0.0.53,[fd00::53]:5353`), for the names a sandbox's rules let it resolve" },
      SANDBOX_DOMAIN: { default: "unset", meaning: "Base domain of host routing: `<port>-<sandboxID>.<domain>` reaches that port of that sandbox, and E2B's create answer carries it as `domain` (a host name, optionally with a port: `sandbox.example.com`, `localhost:8443`). Unset: no host routing" },
      CLAUDE_CODE_BIN: { default: "unset", meaning: "A `claude` executable for the `claude` template (default: the `@anthropic-ai/claude-code` package, then `claude` on the PATH)" },
      E2B_API_KEY: { default: "unset", meaning: "Enables the `e2b` backend" },
      E2B_DOMAIN: { default: "unset", meaning: "E2B domain (self-hosted E2B)" },
      E2B_API_URL: { default: "unset", meaning: "E2B API URL (with `E2B_SANDBOX_URL`, a self-hosted or test endpoint)" },
      E2B_SANDBOX_URL: { default: "unset", meaning: "E2B sandbox URL" },
    },
  },
  {
    title: "Events and outbound connections",
    see: "[Events and webhooks](webhooks.md#events-and-webhooks), [egress](security.md#outbound-connections-egress)",
    variables: {
      SECRETS_KEY: { default: "unset", meaning: "Key that encrypts webhook signing secrets at rest (32 bytes as 64 hex characters or base64, e.g. `openssl rand -hex 32`); the embedded database makes its own in `DATA_DIR/secrets.key` when unset" },
      EVENTS_DELIVERY_TIMEOUT_MS: { default: "`10000`", meaning: "Deadline of a delivery attempt, the whole exchange: the receiver's 2xx must arrive within it, and the connection is closed at it whatever the receiver's body is still doing" },
      EVENTS_RETRY_SCHEDULE: { default: "`5s,5m,30m,2h,5h,10h,10h`", meaning: "Delays before each retry; its length is the number of retries" },
      EVENTS_DELIVERY_CONCURRENCY: { default: "`256`", meaning: "In-flight deliveries per process" },
      EVENTS_RECEIVER_CONCURRENCY: { default: "`16`", meaning: "In-flight deliveries per webhook per process" },
      EVENTS_POLL_MS: { default: "`1000`", meaning: "Fallback poll for retries coming due (new events wake the workers at once)" },
      EGRESS_ALLOW_CIDRS: { default: "empty", meaning: "Comma-separated address blocks (`10.0.0.0/8,fd00::/8`) exempt from the public-address check; plain http is allowed to them" },
    },
  },
  {
    title: "Managed agents",
    see: "[Managed agents](agents.md#managed-agents)",
    variables: {
      AGENT_LEASE_MS: { default: "`30000`", meaning: "A session's lease: how soon another process takes over the loop of a process that died (at least 200)" },
      AGENT_RECOVERY_INTERVAL_MS: { default: "`1000`", meaning: "How often each process looks for sessions whose lease expired (at least 20)" },
      AGENT_MAX_STEPS: { default: "`50`", meaning: "Model calls per turn" },
      AGENT_SANDBOX_IDLE_MS: { default: "`300000`", meaning: "Idleness after which a session's sandbox is paused (at least 100)" },
      AGENT_SANDBOX_TIMEOUT_SEC: { default: "`3600`", meaning: "Lifetime of a session's sandbox" },
      AGENT_STREAM_RECHECK_MS: { default: "`30000`", meaning: "How often an idle session stream re-reads the log anyway; commits wake followers at once through the change feed, in every process (at least 100)" },
      SESSION_STREAMS_PER_KEY: { default: "`100`", meaning: "Open session event streams (stream endpoint, streamed send, streamed endpoint run) per API key, in each process; beyond it 429 `rate_limit_error`" },
      SESSION_STREAMS_PER_ORG: { default: "`500`", meaning: "The same per organization" },
      AGENT_PACKAGE_REGISTRIES: { default: "unset", meaning: "Where environment `packages` install from: `manager=url` pairs (`pip=https://pypi.example/simple/,npm=https://npm.example/`; managers `pip`, `npm`, `cargo`, `gem`, `go`, `apt`). Unset: each package manager's own default. `allow_package_managers` opens these hosts" },
      AGENT_PACKAGE_HOSTS: { default: "unset", meaning: "More hosts (names, addresses or CIDR blocks, comma-separated) `allow_package_managers` opens, e.g. where an index sends its downloads" },
    },
  },
  {
    title: "Deployments",
    see: "[Deployments](agents.md#deployments-and-deployment-runs)",
    variables: {
      DEPLOYMENT_SCHEDULER_POLL_MS: { default: "`1000`", meaning: "How often each process looks for due deployments (a run starts at most this late; at least 10)" },
      DEPLOYMENT_PAUSE_AFTER_FAILURES: { default: "`1`", meaning: "Consecutive non-recoverable failed runs after which a deployment pauses itself" },
    },
  },
  {
    title: "Asynchronous generation",
    see: "[Asynchronous generation](generation.md#asynchronous-generation-images-speech-video)",
    variables: {
      GENERATION_TIMEOUT: { default: "`15m`", meaning: "From submission to `timeout`" },
      GENERATION_WORKERS: { default: "`8`", meaning: "Tasks one process runs at once" },
      GENERATION_LEASE: { default: "`5m`", meaning: "Claim lease: how soon another process takes over a task whose process died (at least `2s`)" },
      GENERATION_POLL: { default: "`1s`", meaning: "Idle workers look for due tasks this often (submissions wake them at once)" },
      GENERATION_UPSTREAM_POLL: { default: "`5s`", meaning: "Interval between checks of an upstream job (video)" },
      GENERATION_MAX_ATTEMPTS: { default: "`3`", meaning: "Claims of a task before it fails (crashes, upstream outages)" },
      GENERATION_RETRY_BACKOFF: { default: "`1s`", meaning: "First delay after a transient upstream failure; doubles, at most 30 s" },
      GENERATION_CALLBACK_RETRY_SCHEDULE: { default: "`5s,5m,30m,2h,5h,10h,10h`", meaning: "Delays between per-task callback attempts" },
      GENERATION_CALLBACK_TIMEOUT: { default: "`10s`", meaning: "Deadline of a callback attempt, the whole exchange (as `EVENTS_DELIVERY_TIMEOUT_MS`)" },
      GENERATION_SYNC_WAIT: { default: "`240s`", meaning: "Longest a `mode: \"sync\"` request waits (at most 250 s, under the server's idle timeout); then it answers 200 with the unfinished Prediction to poll" },
      GENERATION_TASK_RETENTION: { default: "`720h`", meaning: "Age after which tasks are archived out of the cost lookup" },
      GENERATION_ARCHIVE_INTERVAL: { default: "`1m`", meaning: "How often the archiver / settlement sweeper runs" },
      MEDIA_DIR: { default: "`DATA_DIR/media`", meaning: "Where generated files are stored" },
    },
  },
  {
    title: "Observability",
    see: "[Metrics](operations.md#metrics), [Tracing](operations.md#tracing)",
    variables: {
      METRICS_TOKEN: { default: "unset", meaning: "Serves Prometheus metrics at `GET /metrics` on the API port to `Authorization: Bearer <METRICS_TOKEN>` (see [Metrics](operations.md#metrics)); also required on `METRICS_PORT` when both are set" },
      METRICS_PORT: { default: "unset", meaning: "Serves `GET /metrics` on a port of its own (`0` = any free port), without a token unless `METRICS_TOKEN` is set; keep that port off public networks" },
      METRICS_HOST: { default: "`HOST`", meaning: "Listening address of `METRICS_PORT` (e.g. `127.0.0.1`)" },
      METRICS_MAX_MODELS: { default: "`200`", meaning: "Distinct model names kept as metric labels; later ones are counted as `other`" },
      METRICS_MAX_ORGANIZATIONS: { default: "`200`", meaning: "Distinct organization ids kept as metric labels; later ones are counted as `other`" },
      OTEL_EXPORTER_OTLP_ENDPOINT: { default: "unset", meaning: "Turns tracing on: spans go to `<endpoint>/v1/traces` over OTLP/HTTP (JSON), e.g. `http://127.0.0.1:4318`" },
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: { default: "unset", meaning: "The full URL spans are sent to (wins over the general endpoint)" },
      OTEL_EXPORTER_OTLP_HEADERS: { default: "unset", meaning: "Headers for the collector, `key1=value1,key2=value2` (values percent-encoded)" },
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: { default: "unset", meaning: "The same for traces only (wins over the general headers)" },
      OTEL_SERVICE_NAME: { default: "`gateway`", meaning: "The `service.name` of the spans" },
      OTEL_SDK_DISABLED: { default: "`false`", meaning: "`true` turns tracing off whatever else is set" },
      OTEL_TRACES_EXPORTER: { default: "unset", meaning: "`none` turns tracing off" },
    },
  },
];
