import { ApiError } from "./errors";
import { OPEN_SURFACE, type Surface, type SurfaceTable } from "./surfaces";

/** Version segments an SDK puts in front of a path (or a base URL already ends in). */
const VERSION = /^\/(v1|v1beta)(?=\/)/;
const VERSION_ONLY = /^\/(v1|v1beta)$/;

/**
 * The 404 for a path that no route serves and no surface owns. Most such paths are a
 * base URL one segment off: an OpenAI SDK without `/v1` (`/chat/completions`), an
 * Anthropic or Google SDK with one (`/v1/v1/messages`, `/v1/v1beta/models/...`), or a
 * version in front of the unversioned sandbox and event APIs (`/v1/sandboxes`). When
 * moving the version segment gives a path a surface owns, the answer is in that surface's
 * error shape (the one the client's SDK parses) and names the path and the fix.
 */
export function unknownPath(method: string, path: string, surfaces: SurfaceTable): { surface: Surface; error: ApiError } {
  for (const { alternative, fix, added } of alternatives(path)) {
    const surface = surfaces.match(alternative);
    // With a version added in front, a surface owning that whole version (/v1beta) would take any path: it says nothing.
    if (surface !== OPEN_SURFACE && !(added && VERSION_ONLY.test(surface.prefix))) {
      return { surface, error: new ApiError(404, `no route for ${method} ${clip(path)}; did you mean ${clip(alternative)}? ${fix}`) };
    }
  }
  return { surface: OPEN_SURFACE, error: new ApiError(404, "not found") };
}

function alternatives(path: string): { alternative: string; fix: string; added?: boolean }[] {
  const version = VERSION.exec(path)?.[1];
  if (!version) {
    return [
      { alternative: `/v1${path}`, fix: "The base URL probably lacks /v1 (an OpenAI SDK's baseURL ends in it: http://<host>:<port>/v1).", added: true },
      { alternative: `/v1beta${path}`, fix: "The base URL probably lacks /v1beta.", added: true },
    ];
  }
  const rest = path.slice(version.length + 1);
  const doubled = VERSION.test(rest);
  return [
    {
      alternative: rest,
      fix: doubled
        ? `The base URL probably ends in /${version} and the SDK adds its own version: drop /${version} from it (Anthropic and Google SDKs take http://<host>:<port>).`
        : `This API has no version prefix: use http://<host>:<port> as its base URL.`,
    },
  ];
}

/** Threat: a client-chosen path of kilobytes echoed back in an error body. */
function clip(path: string): string {
  return path.length > 200 ? `${path.slice(0, 200)}...` : path;
}
