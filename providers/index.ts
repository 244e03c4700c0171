import type { PluginModule } from "../src/registry/plugin";
import anthropic from "./anthropic";
import azure from "./azure";
import bedrock from "./bedrock";
import cerebras from "./compatible/cerebras";
import deepseek from "./compatible/deepseek";
import fireworks from "./compatible/fireworks";
import groq from "./compatible/groq";
import lmstudio from "./compatible/lmstudio";
import mistral from "./compatible/mistral";
import ollama from "./compatible/ollama";
import openrouter from "./compatible/openrouter";
import perplexity from "./compatible/perplexity";
import together from "./compatible/together";
import vllm from "./compatible/vllm";
import xai from "./compatible/xai";
import e2b from "./e2b";
import gemini from "./gemini";
import local from "./local";
import openai from "./openai";
import vertex from "./vertex";

/**
 * Built-in provider plugins, one module per upstream model vendor or sandbox backend.
 * Adding a vendor: write providers/<vendor>.ts and add one line here; an
 * OpenAI-compatible vendor is a preset in providers/compatible/.
 */
export const builtinPlugins: PluginModule[] = [
  openai,
  anthropic,
  gemini,
  azure,
  bedrock,
  vertex,
  groq,
  mistral,
  deepseek,
  xai,
  together,
  fireworks,
  openrouter,
  cerebras,
  perplexity,
  ollama,
  vllm,
  lmstudio,
  local,
  e2b,
];
