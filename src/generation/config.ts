import type { Settings } from "../settings";

/**
 * Settings of asynchronous generation (docs/generation.md): the GENERATION_*
 * variables, read by src/settings, and PUBLIC_URL, the origin for polling and output URLs
 * (default the request's own origin).
 */
export type GenerationSettings = Settings["generation"] & { publicUrl?: string };
