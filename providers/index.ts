import type { PluginDefinition } from "../src/plugin-api";
import anthropic from "./anthropic";
import azure from "./azure";
import bedrock from "./bedrock";
import cerebras from "./cerebras";
import deepseek from "./deepseek";
import e2b from "./e2b";
import fireworks from "./fireworks";
import gemini from "./gemini";
import groq from "./groq";
import lmstudio from "./lmstudio";
import local from "./local";
import mistral from "./mistral";
import ollama from "./ollama";
import openai from "./openai";
import openrouter from "./openrouter";
import perplexity from "./perplexity";
import together from "./together";
import vertex from "./vertex";
import vllm from "./vllm";
import xai from "./xai";

/**
 * Built-in provider plugins, one module per upstream model vendor or sandbox backend.
 * Adding a vendor: write providers/<vendor>.ts (an OpenAI-compatible one is a few lines
 * on `openAICompatible()`) and add one line here. The order of the model vendors is the
 * catalog's: the first vendor to list a model id keeps it, so first-party vendors come
 * before hosts of open-weight models, and those before the clouds that resell them.
 */
export const builtinPlugins: PluginDefinition[] = [
  openai,
  anthropic,
  gemini,
  mistral,
  deepseek,
  xai,
  groq,
  cerebras,
  perplexity,
  together,
  fireworks,
  openrouter,
  bedrock,
  vertex,
  azure,
  ollama,
  vllm,
  lmstudio,
  local,
  e2b,
];
