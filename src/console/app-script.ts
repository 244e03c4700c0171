// The bundled console script, inlined by the macro where this module is transpiled: into
// the binary at `npm run build`, or on first use when running from source (routes.ts
// imports this module lazily, so services that never serve /console never bundle it).
import { consoleBundle } from "./bundle" with { type: "macro" };

export const APP_JS: string = consoleBundle();
