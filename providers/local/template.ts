import { type SandboxTemplate, type TemplateFieldsOf, Type } from "../../src/plugin-api";

/** Template fields of the local backend (CONFIG_FILE `sandboxes.templates.<id>`). */
export const localTemplateFields = {
  /** Host paths mounted read-only into the sandbox (default /usr). */
  mounts: Type.Optional(Type.Array(Type.String({ pattern: "^/" }))),
  /** Programs that must exist on the host for the template to work (checked before a create). */
  requires: Type.Optional(Type.Array(Type.String({ pattern: "^[A-Za-z0-9._+-]+$" }))),
};

export type LocalTemplateFields = TemplateFieldsOf<typeof localTemplateFields>;

/** A template as the local backend receives it. */
export type LocalTemplate = SandboxTemplate<LocalTemplateFields>;
