import { posix } from "node:path";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { SandboxService } from "../sandboxes/service";
import { sandboxOf } from "./context";
import { envdUser } from "./envd-user";
import { type WatchEventType, type Watchers, startWatch } from "./fs-watch";
import { type EntryInfoSchema, EventType, type Filesystem, FileType, type WatchDirResponseSchema } from "./gen/filesystem_pb";
import { FileMetadata, withMetadata } from "./file-metadata";
import { type Entry, FsError, SandboxFs } from "./sandbox-fs";

const HOME = "/home/user";

const MAX_DEPTH = 32;
const EVENT_TYPES: Record<WatchEventType, EventType> = {
  create: EventType.CREATE,
  write: EventType.WRITE,
  remove: EventType.REMOVE,
  rename: EventType.RENAME,
  chmod: EventType.CHMOD,
};

/** envd's filesystem.Filesystem over helpers run inside the sandbox (see sandbox-fs.ts, fs-watch.ts). */
export function filesystemService(sandboxes: SandboxService, watchers: Watchers): ServiceImpl<typeof Filesystem> {
  /** envd's user of the call (its basic authentication): `root` works in image templates' sandboxes. */
  const userOf = (ctx: HandlerContext) => {
    const user = envdUser(ctx.requestHeader.get("authorization"));
    if (typeof user !== "string") throw new ConnectError(user.error, Code.InvalidArgument);
    return user;
  };
  const fs = (ctx: HandlerContext) => {
    const { organizationId, sandboxId } = sandboxOf(ctx);
    return new SandboxFs(sandboxes, organizationId, sandboxId, userOf(ctx));
  };
  const meta = (ctx: HandlerContext) => {
    const { organizationId, sandboxId } = sandboxOf(ctx);
    return new FileMetadata(sandboxes, organizationId, sandboxId, userOf(ctx));
  };
  /** Entries with their metadata (envd 0.6.2). */
  const full = async (ctx: HandlerContext, entries: Entry[]) => (await withMetadata(meta(ctx), entries)).map(entryInfo);
  const path = (p: string, what = "path") => {
    if (!p) throw new ConnectError(`${what} is required`, Code.InvalidArgument);
    if (p.length > 4096 || p.includes("\0")) throw new ConnectError(`${what} must be at most 4096 characters without NUL`, Code.InvalidArgument);
    return p;
  };

  return {
    stat: (req, ctx) => rpc(async () => ({ entry: (await full(ctx, [await fs(ctx).stat(path(req.path))]))[0] })),
    makeDir: (req, ctx) => rpc(async () => ({ entry: entryInfo(await fs(ctx).makeDir(path(req.path))) })),
    move: (req, ctx) => rpc(async () => ({ entry: (await full(ctx, [await fs(ctx).move(path(req.source, "source"), path(req.destination, "destination"))]))[0] })),
    remove: (req, ctx) => rpc(async () => (await fs(ctx).remove(path(req.path)), {})),
    listDir: (req, ctx) =>
      rpc(async () => {
        const depth = req.depth || 1;
        if (depth > MAX_DEPTH) throw new ConnectError(`depth must be at most ${MAX_DEPTH}`, Code.InvalidArgument);
        return { entries: await full(ctx, await fs(ctx).list(path(req.path), depth)) };
      }),

    async *watchDir(req, ctx): AsyncGenerator<MessageInitShape<typeof WatchDirResponseSchema>> {
      const { organizationId, sandboxId } = sandboxOf(ctx);
      const watch = await rpc(() => startWatch(sandboxes, organizationId, sandboxId, path(req.path), req.recursive));
      const stop = () => watch.stop();
      ctx.signal.addEventListener("abort", stop, { once: true });
      try {
        yield { event: { case: "start", value: {} } };
        // includeEntry (envd 0.6.3): the entry as Stat gives it, where the path still exists.
        // allowNetworkMounts (0.6.4) needs nothing: watches here are not refused on any mount.
        const root = posix.resolve(HOME, req.path.replace(/^~(\/|$)/, ""));
        for await (const e of watch.events) {
          const entry = req.includeEntry && e.type !== "remove" && e.type !== "rename" ? await fs(ctx).stat(posix.join(root, e.name)).then((x) => full(ctx, [x]).then((l) => l[0]), () => undefined) : undefined;
          yield { event: { case: "filesystem", value: { name: e.name, type: EVENT_TYPES[e.type], entry } } };
        }
      } finally {
        ctx.signal.removeEventListener("abort", stop);
        watch.stop();
      }
    },

    createWatcher: (req, ctx) =>
      rpc(async () => {
        const { organizationId, sandboxId } = sandboxOf(ctx);
        return { watcherId: await watchers.create(sandboxes, organizationId, sandboxId, path(req.path), req.recursive) };
      }),
    getWatcherEvents: (req, ctx) => rpc(async () => ({ events: watchers.take(sandboxOf(ctx).sandboxId, req.watcherId).map((e) => ({ name: e.name, type: EVENT_TYPES[e.type] })) })),
    removeWatcher: (req, ctx) => rpc(async () => (watchers.remove(sandboxOf(ctx).sandboxId, req.watcherId), {})),
  };
}

/** File errors as Connect codes the SDK maps (NotFound -> FileNotFoundError, AlreadyExists -> makeDir's false). */
async function rpc<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof FsError) {
      const code = { not_found: Code.NotFound, invalid: Code.InvalidArgument, exists: Code.AlreadyExists, failed: Code.Internal }[e.kind];
      throw new ConnectError(e.message, code);
    }
    throw e;
  }
}

function entryInfo(e: Entry): MessageInitShape<typeof EntryInfoSchema> {
  return {
    name: e.name,
    type: e.type === "dir" ? FileType.DIRECTORY : e.type === "file" ? FileType.FILE : FileType.UNSPECIFIED,
    path: e.path,
    size: BigInt(e.size),
    mode: e.mode,
    permissions: e.permissions,
    owner: e.owner,
    group: e.group,
    modifiedTime: timestampFromMs(e.modifiedMs),
    symlinkTarget: e.symlinkTarget,
    metadata: e.metadata,
  };
}
