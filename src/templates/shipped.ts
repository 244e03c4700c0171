/**
 * Templates the project ships as definitions (Dockerfiles), built on a service by its
 * operator (`gateway templates build --shipped <name>`, cli.ts) from Debian packages.
 *
 * `code_interpreter`: the environment of E2B's code-interpreter template as Debian packages
 * it: python3 with the IPython kernel and jupyter-client (the Python context), numpy,
 * pandas, matplotlib, scipy, requests and Pillow (what E2B's template pip-installs and
 * Debian has), Node.js with Debian's TypeScript (the JavaScript and TypeScript contexts).
 * R's IRkernel is Debian's too (`r-cran-irkernel`) but large: EXTRA_PACKAGES adds it.
 *
 * Once an organization has built it under the name `code_interpreter`, its creates of
 * `code_interpreter` (and E2B's `code-interpreter-v1`) start sandboxes of the build
 * (SandboxService.origin), and the code interpreter serves them as it serves the
 * configured one (interpreter-http.ts); until then the configured template, on the host's
 * /usr, keeps serving. Its kernels are started by the service inside the sandbox with the
 * template's own /usr/bin/python3 and /usr/bin/node (src/e2b/kernels.ts), so the template
 * needs no interpreter server of its own and no start command that could fail to bring one
 * up (the known pitfall of E2B's self-hosted code interpreter).
 *
 * Build arguments:
 *   BASE             the Debian bookworm base: an image (`debian:bookworm-slim` from a
 *                    registry) or a local one, e.g. `oci:/var/lib/gateway/debian:base` made
 *                    with debootstrap (docs/sandboxes.md shows how)
 *   APT_SOURCES      one apt source line (a mirror, a local repository); empty: the base's own
 *   PYTHON_PACKAGES, DATA_PACKAGES, NODE_PACKAGES, EXTRA_PACKAGES   what each step installs
 * Each package group is its own step (and cached layer): a rebuild after a change to one
 * group installs that group and the later ones again, not the earlier ones. The steps run
 * as root; the sandboxes run as E2B's \`user\` in /home/user (dockerfile.ts).
 */
export interface ShippedTemplate {
  description: string;
  dockerfile: string;
}

const CODE_INTERPRETER = `# The code interpreter's environment, from Debian packages (src/templates/shipped.ts).
ARG BASE=debian:bookworm-slim
FROM \${BASE}
ARG APT_SOURCES=""
ARG PYTHON_PACKAGES="python3 python3-ipykernel python3-jupyter-client"
ARG DATA_PACKAGES="python3-numpy python3-pandas python3-matplotlib python3-scipy python3-requests python3-pil"
ARG NODE_PACKAGES="nodejs node-typescript"
ARG EXTRA_PACKAGES=""
ARG DEBIAN_FRONTEND=noninteractive
RUN if [ -n "$APT_SOURCES" ]; then printf '%s\\n' "$APT_SOURCES" > /etc/apt/sources.list && rm -rf /etc/apt/sources.list.d/*; fi
RUN apt-get update && apt-get install -y --no-install-recommends $PYTHON_PACKAGES && apt-get clean && rm -rf /var/lib/apt/lists/*
RUN [ -z "$DATA_PACKAGES" ] || { apt-get update && apt-get install -y --no-install-recommends $DATA_PACKAGES && apt-get clean && rm -rf /var/lib/apt/lists/*; }
RUN [ -z "$NODE_PACKAGES" ] || { apt-get update && apt-get install -y --no-install-recommends $NODE_PACKAGES && apt-get clean && rm -rf /var/lib/apt/lists/*; }
RUN [ -z "$EXTRA_PACKAGES" ] || { apt-get update && apt-get install -y --no-install-recommends $EXTRA_PACKAGES && apt-get clean && rm -rf /var/lib/apt/lists/*; }
`;

export const SHIPPED_TEMPLATES: Record<string, ShippedTemplate> = {
  code_interpreter: {
    description: "the code interpreter's environment from Debian packages: python3 with IPython, numpy, pandas, matplotlib, scipy; Node.js with TypeScript",
    dockerfile: CODE_INTERPRETER,
  },
};

/** Names an organization may build although a configured template has them: its build then serves its creates of that name. */
export const OVERRIDABLE_TEMPLATES: ReadonlySet<string> = new Set(Object.keys(SHIPPED_TEMPLATES));

/** The template name a sandbox's template id stands for: `name` of `name[:tag][@build]`. */
export function templateNameOf(templateId: string): string {
  return templateId.split("@")[0]!.split(":")[0]!;
}
