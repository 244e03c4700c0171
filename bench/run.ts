// `npm run bench [part ...]`: runs the benchmark parts (all by default) and prints
// Markdown tables to paste into docs/benchmarks.md. Benchmarks talk only to 127.0.0.1, and the
// sandbox network part to a test host in a network namespace it makes (198.51.100.x).
export {};

const parts: Record<string, () => Promise<{ run(): Promise<void> }>> = {
  foundation: () => import("./foundation"),
  gateway: () => import("./gateway"),
  // Multipart uploads and the Realtime relay against their minimal baselines.
  breadth: () => import("./breadth"),
  // Where the gateway's CPU goes: the service under wrk with the profiler on.
  "gateway-profile": () => import("./gateway-profile"),
  limits: () => import("./limits"),
  holds: () => import("./holds"),
  metering: () => import("./metering"),
  events: () => import("./events"),
  sandboxes: () => import("./sandboxes"),
  // Also part of `sandboxes`; alone, without its 200 idle sandboxes and network rows.
  "sandbox-lifecycle": () => import("./sandboxes").then((m) => ({ run: m.runLifecycle })),
  // Also part of `sandboxes`: the shipped code_interpreter template's build, cold and cached.
  "template-build": () => import("./sandboxes").then((m) => ({ run: m.runTemplateBuild })),
  agents: () => import("./agents"),
  generation: () => import("./generation"),
  revocation: () => import("./revocation"),
  observability: () => import("./observability"),
  metrics: () => import("./metrics"),
  startup: () => import("./startup"),
  memory: () => import("./memory"),
  workers: () => import("./workers"),
};

const wanted = process.argv.slice(2);
for (const name of wanted) {
  if (!parts[name]) {
    console.error(`unknown benchmark part "${name}"; parts: ${Object.keys(parts).join(", ")}`);
    process.exit(2);
  }
}
for (const name of wanted.length ? wanted : Object.keys(parts)) {
  console.log(`\n## ${name}\n`);
  const mod = await parts[name]();
  await mod.run();
}
process.exit(0);
