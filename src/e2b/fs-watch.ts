import { randomBytes } from "node:crypto";
import type { SandboxService } from "../sandboxes/service";
import { lines as readLines } from "../streams/lines";
import { FsError } from "./sandbox-fs";

/**
 * Directory watches of the E2B data plane: inotify inside the sandbox, through
 * python3's ctypes (python3 comes from the sandbox's /usr; no extra package). The
 * watcher prints `ready`, then one JSON line per event with the name relative to the
 * watched directory and E2B's event type.
 */
const WATCHER = String.raw`
import ctypes, json, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
root = sys.argv[1] if sys.argv[1].startswith("/") else os.path.join(os.environ.get("HOME", "/"), sys.argv[1])
recursive = sys.argv[2] == "1"
if not os.path.exists(root):
    sys.exit(3)
if not os.path.isdir(root):
    sys.exit(7)
fd = libc.inotify_init1(0)
MODIFY, ATTRIB, MOVED_FROM, MOVED_TO, CREATE, DELETE, ISDIR = 0x2, 0x4, 0x40, 0x80, 0x100, 0x200, 0x40000000
MASK = MODIFY | ATTRIB | MOVED_FROM | MOVED_TO | CREATE | DELETE
watches = {}
def add(path):
    wd = libc.inotify_add_watch(fd, path.encode(), MASK)
    if wd >= 0:
        watches[wd] = path
add(root)
if recursive:
    for d, subdirs, _ in os.walk(root):
        for s in subdirs:
            add(os.path.join(d, s))
print("ready", flush=True)
while True:
    data = os.read(fd, 65536)
    i = 0
    while i < len(data):
        wd, mask, _, n = struct.unpack_from("iIII", data, i)
        name = data[i + 16:i + 16 + n].rstrip(b"\0").decode(errors="replace")
        i += 16 + n
        base = watches.get(wd)
        if base is None:
            continue
        full = os.path.join(base, name) if name else base
        rel = os.path.relpath(full, root)
        kinds = []
        if mask & (CREATE | MOVED_TO):
            kinds.append("create")
            if recursive and mask & ISDIR:
                add(full)
        if mask & MODIFY:
            kinds.append("write")
        if mask & DELETE:
            kinds.append("remove")
        if mask & MOVED_FROM:
            kinds.append("rename")
        if mask & ATTRIB:
            kinds.append("chmod")
        for k in kinds:
            sys.stdout.write(json.dumps({"name": rel, "type": k}) + "\n")
        sys.stdout.flush()
`;

export type WatchEventType = "create" | "write" | "remove" | "rename" | "chmod";
export interface WatchEvent {
  name: string;
  type: WatchEventType;
}

/** A running watcher: `events` yields until `stop()` or the sandbox goes. */
export interface Watch {
  events: AsyncGenerator<WatchEvent>;
  stop(): void;
}

/** Starts a watcher and resolves once it watches (so changes made after this are seen). */
export async function startWatch(sandboxes: SandboxService, organizationId: string, sandboxId: string, path: string, recursive: boolean): Promise<Watch> {
  const p = await sandboxes.spawn(organizationId, sandboxId, { argv: ["python3", "-c", WATCHER, path, recursive ? "1" : "0"], env: {} });
  p.closeStdin();
  // An event line is a JSON object naming one path: 64 KiB is far past the longest (PATH_MAX is 4096).
  const lines = readLines(p.stdout, { maxBytes: 64 * 1024 });
  const first = await lines.next();
  if (first.done || first.value.text !== "ready") {
    p.kill("SIGKILL");
    const code = await p.exited;
    if (code === 3) throw new FsError("not_found", `no such directory: ${path}`);
    if (code === 7) throw new FsError("invalid", `not a directory: ${path}`);
    throw new FsError("failed", `could not watch ${path} (python3 is needed inside the sandbox)`);
  }
  async function* events(): AsyncGenerator<WatchEvent> {
    for await (const line of lines) {
      if (line.cut) continue;
      try {
        yield JSON.parse(line.text) as WatchEvent;
      } catch {
        // Not an event line.
      }
    }
  }
  return { events: events(), stop: () => p.kill("SIGKILL") };
}

const MAX_WATCHERS = 64;
const MAX_BUFFERED = 10_000;

/** The non-streaming watchers (CreateWatcher / GetWatcherEvents / RemoveWatcher), per sandbox. */
export class Watchers {
  private readonly byId = new Map<string, { sandboxId: string; watch: Watch; events: WatchEvent[] }>();

  async create(sandboxes: SandboxService, organizationId: string, sandboxId: string, path: string, recursive: boolean): Promise<string> {
    // Threat: a client creating watchers without end, each a process in the sandbox.
    if ([...this.byId.values()].filter((w) => w.sandboxId === sandboxId).length >= MAX_WATCHERS) throw new FsError("invalid", `at most ${MAX_WATCHERS} watchers per sandbox; remove one first`);
    const watch = await startWatch(sandboxes, organizationId, sandboxId, path, recursive);
    const id = randomBytes(12).toString("hex");
    const entry = { sandboxId, watch, events: [] as WatchEvent[] };
    this.byId.set(id, entry);
    void (async () => {
      for await (const e of watch.events) if (entry.events.length < MAX_BUFFERED) entry.events.push(e);
      this.byId.delete(id);
    })();
    return id;
  }

  take(sandboxId: string, id: string): WatchEvent[] {
    const w = this.byId.get(id);
    if (!w || w.sandboxId !== sandboxId) throw new FsError("not_found", `watcher ${id} not found`);
    return w.events.splice(0);
  }

  remove(sandboxId: string, id: string): void {
    const w = this.byId.get(id);
    if (!w || w.sandboxId !== sandboxId) throw new FsError("not_found", `watcher ${id} not found`);
    w.watch.stop();
    this.byId.delete(id);
  }
}
