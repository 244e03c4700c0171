import { createConnectRouter, createContextValues } from "@connectrpc/connect";
import { type UniversalHandler, universalServerRequestFromFetch, universalServerResponseToFetch } from "@connectrpc/connect/protocol";
import type { SandboxService } from "../sandboxes/service";
import { apiErrors, DROP_STREAM, SANDBOX, type SandboxRef } from "./context";
import { filesystemService } from "./filesystem-service";
import { Watchers } from "./fs-watch";
import { Filesystem } from "./gen/filesystem_pb";
import { Process } from "./gen/process_pb";
import { processService } from "./process-service";
import type { ProcessTable } from "./processes";

/**
 * envd's Connect RPC services (process.Process, filesystem.Filesystem) behind the data
 * plane. A module of its own so that the data plane loads it (the Connect runtime and the
 * generated protobuf code, some 20 MB of a process's memory) on the first call, not in
 * every service that never sees an E2B SDK.
 */
export class EnvdRpc {
  private readonly handlers: Map<string, UniversalHandler>;

  constructor(d: { processes: ProcessTable; sandboxes: SandboxService; bodyLimit: number }) {
    // Threat: a message that is small on the wire and large in memory; the body limit applies to each message.
    const router = createConnectRouter({ interceptors: [apiErrors], readMaxBytes: d.bodyLimit });
    router.service(Process, processService(d.processes));
    router.service(Filesystem, filesystemService(d.sandboxes, new Watchers()));
    this.handlers = new Map(router.handlers.map((h) => [h.requestPath, h]));
  }

  /** Whether `path` names one of the services' methods. */
  has(path: string): boolean {
    return this.handlers.has(path);
  }

  /** Runs the method at `path` (which `has`) for the authenticated sandbox; `drop` cuts its stream (DROP_STREAM). */
  async call(path: string, request: Request, ref: SandboxRef, drop: () => void): Promise<Response> {
    const ureq = universalServerRequestFromFetch(request, {});
    ureq.contextValues = createContextValues().set(SANDBOX, ref).set(DROP_STREAM, drop);
    return universalServerResponseToFetch(await this.handlers.get(path)!(ureq));
  }
}
