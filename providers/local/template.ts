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
};

export type LocalTemplateFields = TemplateFieldsOf<typeof localTemplateFields>;

/** A template as the local backend receives it. */
export type LocalTemplate = SandboxTemplate<LocalTemplateFields>;
