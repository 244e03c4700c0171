import type { PluginDefinition } from "../src/plugin-api";
import anthropic from "./anthropic";
import deepseek from "./deepseek";
import e2b from "./e2b";
import gemini from "./gemini";
import local from "./local";
import mistral from "./mistral";
import openai from "./openai";
import xai from "./xai";

/**
 * Built-in provider plugins, one module per upstream model vendor or sandbox backend.
 * Adding a vendor: write providers/<vendor>.ts and add one line here. The order of the
 * model vendors is the catalog's: the first vendor to list a model id keeps it.
 */
export const builtinPlugins: PluginDefinition[] = [
  openai,
  anthropic,
  gemini,
  mistral,
  deepseek,
  xai,
  local,
  e2b,
];
