/**
 * The one module a provider plugin imports: everything a model vendor or a sandbox
 * backend needs, and nothing of the service's internals. Built-in providers (providers/)
 * import only from here; plugins in PLUGINS_DIR default-export a function that receives
 * `pluginApi` (no import at run time, so they work beside the compiled binary) and may
 * `import type` from here to be type-checked.
 */
import { Type } from "@sinclair/typebox";
import { egressPolicyFromEnv } from "./egress";
import { inCidr, parseAddress, parseCidr, RESERVED_V4 } from "./egress/ip";
import { openAICompatible } from "./gateway/openai-compatible";
import { clientHeader, GenerationError, httpProvider } from "./gateway/provider";
import { downloadMedia, mediaType, readMedia, sniffImage, upstreamError } from "./generation/upstream";
import { definePlugin, HOSTED_MODEL_ID } from "./registry/plugin";
import { BackendError, CANCELLED_MARKER } from "./sandboxes/backend";
import { DEFAULT_RESOURCES } from "./sandboxes/templates";
import { domainAllowed, opensNetwork } from "./sandboxes/network";

export type { Static, TObject, TSchema } from "@sinclair/typebox";
export type { EgressPolicy } from "./egress";
export type { Cidr } from "./egress/ip";
export type { EgressRules } from "./sandboxes/network";
export type { OpenAICompatibleVendor } from "./gateway/openai-compatible";
export type { Protocol } from "./gateway/protocols";
export type {
  GeneratedFile,
  GenerationCapability,
  GenerationErrorCategory,
  GenerationRequest,
  GenerationStep,
  GenerationType,
  GenerationUsage,
  HttpProviderSpec,
  ModelProvider,
  UpstreamRequest,
} from "./gateway/provider";
export type { MediaSource } from "./generation/upstream";
export type { Logger } from "./log";
export type { CatalogSource, ModelPluginDefinition, PluginContext, PluginDefinition, SandboxPluginDefinition, TemplateFieldsOf } from "./registry/plugin";
export type {
  BackendState,
  CreateSpec,
  DirEntry,
  ExecResult,
  ExecSpec,
  FullSandboxBackend,
  Liveness,
  PauseOptions,
  ResumeOptions,
  SandboxBackend,
  SandboxCapability,
  SandboxFilesystem,
  SandboxLifecycle,
  SandboxNetworking,
  SandboxPause,
  SandboxProcesses,
  SandboxResources,
  SandboxTemplate,
  SandboxUsage,
  SpawnedProcess,
  SpawnSpec,
  SandboxUser,
} from "./sandboxes/backend";

export {
  BackendError,
  CANCELLED_MARKER,
  clientHeader,
  DEFAULT_RESOURCES,
  definePlugin,
  domainAllowed,
  downloadMedia,
  egressPolicyFromEnv,
  GenerationError,
  HOSTED_MODEL_ID,
  httpProvider,
  inCidr,
  mediaType,
  openAICompatible,
  opensNetwork,
  parseAddress,
  parseCidr,
  readMedia,
  RESERVED_V4,
  sniffImage,
  Type,
  upstreamError,
};

/** What a plugin module that default-exports a function receives: the values exported above. */
export const pluginApi = {
  BackendError,
  CANCELLED_MARKER,
  clientHeader,
  DEFAULT_RESOURCES,
  definePlugin,
  domainAllowed,
  downloadMedia,
  egressPolicyFromEnv,
  GenerationError,
  HOSTED_MODEL_ID,
  httpProvider,
  inCidr,
  mediaType,
  openAICompatible,
  opensNetwork,
  parseAddress,
  parseCidr,
  readMedia,
  RESERVED_V4,
  sniffImage,
  Type,
  upstreamError,
};

export type PluginApi = typeof pluginApi;

/** A plugin module's default export: a definition, or a function of the plugin API returning one. */
export type PluginModule = import("./registry/plugin").PluginDefinition | ((api: PluginApi) => import("./registry/plugin").PluginDefinition);
