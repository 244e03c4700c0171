import type { PluginModule } from "../src/registry/plugin";
import anthropic from "./anthropic";
import e2b from "./e2b";
import gemini from "./gemini";
import local from "./local";
import openai from "./openai";

/**
 * Built-in provider plugins, one module per upstream model vendor or sandbox backend.
 * Adding a vendor: write providers/<vendor>.ts and add one line here.
 */
export const builtinPlugins: PluginModule[] = [
  openai,
  anthropic,
  gemini,
  local,
  e2b,
];
