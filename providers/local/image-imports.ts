import { BackendError, type Logger } from "../../src/plugin-api";
import type { LayerStore } from "../../src/templates/layers";
import type { LocalTemplate } from "./template";

/** What an image template's sandbox is started with. */
export interface ImportedLayers {
  /** Layer digests, bottom first. */
  layers: string[];
  env: Record<string, string>;
}

/**
 * The images of CONFIG_FILE templates (`image`), imported into the layer store once, on
 * first use, however many sandboxes wait for them; a failed import is remembered so the
 * template reports itself unavailable instead of importing again on every create.
 */
export class ImageImports {
  private readonly imports = new Map<string, { done: Promise<ImportedLayers>; failed?: string }>();

  constructor(private readonly opts: { layers?: LayerStore; log: Logger }) {}

  /** Why importing `image` failed, if it did. */
  failed(image: string): string | undefined {
    return this.imports.get(image)?.failed;
  }

  /**
   * An image template's layers and environment: its own `layers`, or its `image` imported
   * on first use (one import per image however many sandboxes wait for it, progress in
   * the service log). Undefined for a host-/usr template.
   */
  async imageOf(t: LocalTemplate): Promise<ImportedLayers | undefined> {
    const store = this.opts.layers;
    if (t.layers) return { layers: t.layers, env: t.imageConfig?.env ?? {} };
    if (!t.image || !store) return undefined;
    const source = t.image;
    let entry = this.imports.get(source);
    if (!entry) {
      const log = this.opts.log;
      const record: { done: Promise<ImportedLayers>; failed?: string } = {
        done: store
          .importImage(source, { progress: (line) => log.info(`template ${t.id}: ${line}`) })
          .then((img) => ({ layers: img.layers, env: img.config.env }))
          .catch((e: Error) => {
            record.failed = e.message;
            log.error(`template ${t.id}: importing its image failed`, { error: e.message });
            throw new BackendError(503, `template ${t.id} is unavailable: importing its image failed: ${e.message}`);
          }),
      };
      entry = record;
      this.imports.set(source, entry);
    }
    return entry.done;
  }
}
