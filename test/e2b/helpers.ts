import { Sandbox } from "e2b";
import { startTestService, type TestService } from "../helpers/service";
import { destroyAll, requireBubblewrap } from "../sandboxes/helpers";

/**
 * One service per test file, with an organization and key, and the official SDK's
 * connection options for it: only `apiUrl`, `sandboxUrl` and the key.
 */
export interface E2BContext {
  svc: TestService;
  key: string;
  org: string;
  opts: { apiKey: string; apiUrl: string; sandboxUrl: string };
}

export async function startE2B(): Promise<E2BContext> {
  requireBubblewrap();
  const svc = await startTestService({ SANDBOX_REAPER_INTERVAL_MS: "100" });
  const org = await svc.org();
  const { key } = await svc.key(org);
  return { svc, key, org, opts: sdkOptions(svc, key) };
}

export function sdkOptions(svc: TestService, apiKey: string) {
  return { apiKey, apiUrl: `${svc.url}/e2b`, sandboxUrl: `${svc.url}/e2b/sandbox` };
}

export async function stopE2B(c: E2BContext | undefined): Promise<void> {
  if (!c) return;
  await destroyAll(c.svc);
  await c.svc.close();
}

export { Sandbox };
