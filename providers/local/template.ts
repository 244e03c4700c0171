import { type SandboxTemplate, type TemplateFieldsOf, Type } from "../../src/plugin-api";

/** Template fields of the local backend (CONFIG_FILE `sandboxes.templates.<id>`). */
export const localTemplateFields = {
  /** Host paths mounted read-only into the sandbox (default /usr). */
  mounts: Type.Optional(Type.Array(Type.String({ pattern: "^/" }))),
  /** Programs that must exist on the host for the template to work (checked before a create). */
  requires: Type.Optional(Type.Array(Type.String({ pattern: "^[A-Za-z0-9._+-]+$" }))),
  /**
   * Host executables mounted read-only into the sandbox as `/opt/gateway/bin/<name>`, on its
   * PATH; a null path means the program could not be found, and the template is unavailable
   * saying so.
   */
  programs: Type.Optional(Type.Record(Type.String({ pattern: "^[A-Za-z0-9._+-]+$" }), Type.Union([Type.String({ pattern: "^/" }), Type.Null()]))),
  /**
   * An image template's root: stored layer digests (src/templates/layers.ts), bottom to
   * top, mounted as the lower directories of the sandbox's overlay root instead of the
   * host's /usr (`mounts` is then ignored). Set by the image import or a template build.
   */
  layers: Type.Optional(Type.Array(Type.String({ pattern: "^[0-9a-f]{64}$" }), { minItems: 1, maxItems: 128 })),
  /**
   * An image to import on first use (CONFIG_FILE), in skopeo's syntax: oci-archive:/path,
   * oci:/dir, docker-archive:/path, docker-daemon:name:tag, docker://registry/name:tag.
   * Its layers and configuration then fill `layers` and `imageConfig`.
   */
  image: Type.Optional(Type.String({ pattern: "^(oci-archive:|oci:|docker-archive:|docker-daemon:|docker://)" })),
  /** The image's configuration: environment, working directory, user, start command. */
  imageConfig: Type.Optional(
    Type.Object({
      env: Type.Record(Type.String(), Type.String()),
      workdir: Type.Optional(Type.String({ pattern: "^/" })),
      user: Type.Optional(Type.String()),
      cmd: Type.Optional(Type.Array(Type.String())),
      entrypoint: Type.Optional(Type.Array(Type.String())),
    }),
  ),
};

export type LocalTemplateFields = TemplateFieldsOf<typeof localTemplateFields>;

/** A template as the local backend receives it. */
export type LocalTemplate = SandboxTemplate<LocalTemplateFields>;
