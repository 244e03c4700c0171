/**
 * The code interpreter's kernel owner, run inside the sandbox with the system python
 * (/usr/bin/python3, where Debian's python3-ipykernel and python3-jupyter-client
 * live): it starts one IPython kernel through jupyter_client and speaks JSON lines
 * over its stdio. In: `{"code": ..., "env": {...}}` or `{"restart": true}`, and
 * `{"interrupt": true}` at any time (read by a thread of its own, so it reaches a run in
 * progress: the client went away). Out: the code interpreter's own line types (stdout,
 * stderr, result, error, number_of_executions), then `{"type": "end_of_execution"}` per
 * request; `ready` once the kernel answers. Results are shaped as E2B's server shapes them:
 * text/plain without the quotes of a string's repr, E2B's own MIME types (`e2b/data`,
 * `e2b/chart`) under their names, any other MIME type under `extra`. Per-run `env` is
 * set before the run and undone after it (kernel-startup.ts, loaded into each kernel at
 * start and restart from argv[2], with the chart extractor's source, kernel-charts.ts, from
 * argv[3]). argv[4] names the Jupyter kernel: python3, or ir (R, Debian's r-cran-irkernel),
 * whose per-run env is set and put back with Sys.setenv / Sys.unsetenv. Stream text goes out in pieces of at most
 * 64 KiB characters, so one long printed line stays many short output lines (the
 * service bounds the lines it reads: src/streams/lines.ts).
 */
export const KERNEL_BRIDGE = String.raw`
import json, os, queue, sys, threading, time
from jupyter_client.manager import KernelManager

PIECE = 65536
DEBIAN_MPLRC = "/usr/share/matplotlib/mpl-data/matplotlibrc"
# Set when the client of the run in progress went away: its output is read and dropped here.
interrupted = threading.Event()

MIME = {"text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg",
        "image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex",
        "application/json": "json", "application/javascript": "javascript",
        "e2b/data": "data", "e2b/chart": "chart"}
KERNEL = sys.argv[4] if len(sys.argv) > 4 else "python3"
PYTHON = KERNEL == "python3"
STARTUP = ("_e2b_m = __import__('sys').modules.setdefault('_e2b', __import__('types').ModuleType('_e2b')); _e2b_m.CHARTS_SOURCE = %r; "
           "exec(%r, _e2b_m.__dict__); del _e2b_m" % (sys.argv[3], sys.argv[2]))

def r_string(v):
    return json.dumps(v)

def r_set_env(env):
    # Each variable's old value (NA: unset) kept in the kernel, put back by r_restore_env.
    names = "c(" + ", ".join(r_string(k) for k in env) + ")"
    sets = ", ".join("%s = %s" % (r_string(k), r_string(v)) for k, v in env.items())
    return ".e2b_saved <- Sys.getenv(%s, unset = NA, names = TRUE); do.call(Sys.setenv, list(%s)); invisible(NULL)" % (names, sets)

R_RESTORE_ENV = ("for (.e2b_k in names(.e2b_saved)) { if (is.na(.e2b_saved[[.e2b_k]])) Sys.unsetenv(.e2b_k) "
                 "else do.call(Sys.setenv, setNames(list(.e2b_saved[[.e2b_k]]), .e2b_k)) }; rm(.e2b_saved, .e2b_k); invisible(NULL)")

def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

km = KernelManager(kernel_name=KERNEL)
env = dict(os.environ)
# Debian's matplotlib reads /etc/matplotlibrc, which a sandbox (the host's /usr only) does
# not have: without this import matplotlib fails ("Could not find matplotlibrc").
if not os.path.exists("/etc/matplotlibrc") and os.path.exists(DEBIAN_MPLRC):
    env.setdefault("MATPLOTLIBRC", DEBIAN_MPLRC)
# Figures render inline as PNG results, as in E2B's kernels.
env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
km.start_kernel(cwd=sys.argv[1], env=env)
kc = km.client()
kc.start_channels()

def wait_for_output_channel(timeout=120):
    # wait_for_ready answers once the kernel replies on its request channel, but the
    # output channel is a subscription that connects on its own time (after a restart
    # too): what the kernel publishes before it has connected is lost, and a run that
    # missed its "idle" would wait for ever. So ask until a request's own status arrives.
    deadline = time.time() + timeout
    while time.time() < deadline:
        msg_id = kc.kernel_info()
        until = time.time() + 1
        while time.time() < until:
            try:
                msg = kc.get_iopub_msg(timeout=max(0.05, until - time.time()))
            except queue.Empty:
                break
            if msg["parent_header"].get("msg_id") == msg_id:
                return
    raise RuntimeError("the kernel's output channel did not connect within %d s" % timeout)

kc.wait_for_ready(timeout=120)
wait_for_output_channel()

def result(kind, data):
    r = {"type": "result", "is_main_result": kind == "execute_result"}
    extra = {}
    for mime, value in data.items():
        if mime == "text/plain" and len(value) > 0 and value[0] in "'\"" and value[-1] == value[0]:
            # E2B gives a string's text, not its repr: 'bar' -> bar.
            value = value[1:-1]
        if mime in MIME:
            r[MIME[mime]] = value
        else:
            extra[mime] = value
    r["extra"] = extra
    return r

def run(code, silent=False):
    msg_id = kc.execute(code, silent=silent, store_history=not silent, allow_stdin=False)
    while True:
        msg = kc.get_iopub_msg()
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, c = msg["msg_type"], msg["content"]
        if silent or interrupted.is_set():
            pass
        elif kind == "stream":
            text = c["text"]
            for i in range(0, max(len(text), 1), PIECE):
                out({"type": c["name"], "text": text[i:i + PIECE]})
        elif kind in ("execute_result", "display_data"):
            out(result(kind, c["data"]))
        elif kind == "error":
            out({"type": "error", "name": c["ename"], "value": c["evalue"], "traceback": "\n".join(c["traceback"])})
        elif kind == "execute_input":
            out({"type": "number_of_executions", "execution_count": c["execution_count"]})
        if kind == "status" and c["execution_state"] == "idle":
            return

requests = queue.Queue()

def read_requests():
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("interrupt"):
            interrupted.set()
            km.interrupt_kernel()
        else:
            requests.put(req)
    requests.put(None)

threading.Thread(target=read_requests, daemon=True).start()
if PYTHON:
    run(STARTUP, silent=True)
out({"type": "ready"})

while True:
    req = requests.get()
    if req is None:
        break
    interrupted.clear()
    if req.get("restart"):
        km.restart_kernel()
        kc.wait_for_ready(timeout=120)
        wait_for_output_channel()
        if PYTHON:
            run(STARTUP, silent=True)
    else:
        env = req.get("env") or {}
        if env:
            run("__import__('_e2b').set_env(" + json.dumps(env) + ")" if PYTHON else r_set_env(env), silent=True)
        run(req["code"])
        if env:
            run("__import__('_e2b').restore_env()" if PYTHON else R_RESTORE_ENV, silent=True)
    out({"type": "end_of_execution"})
`;
