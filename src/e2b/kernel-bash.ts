/**
 * The code interpreter's Bash kernel: a small kernel of our own, run inside the sandbox with
 * the system python, speaking the same JSON lines as the Python bridge (kernel-bridge.ts).
 * It keeps one `bash` process per context, so variables, functions and the working directory
 * carry from one run to the next, as in E2B's bash kernel.
 *
 * Each run's code is handed to bash as a quoted here-document and `eval`ed, so any text
 * (a syntax error, an unbalanced quote) stays one run: bash reports it and goes on. After it,
 * bash prints a marker with the run's exit status, one random per run, on stdout and stderr:
 * what comes before it is the run's output. A nonzero status is the run's error (name
 * empty, value the status), as E2B's bash kernel reports it. Per-run env is exported before
 * the run and put back after it. An interrupt is SIGINT to bash's process group (bash itself
 * traps it and lives on); a bash that exits (`exit` in a run) is reported and started anew.
 *
 * argv: cwd.
 */
export const KERNEL_BASH = String.raw`
import json, os, queue, re, secrets, shlex, signal, subprocess, sys, threading

PIECE = 65536
cwd = sys.argv[1]
lock = threading.Lock()

def out(obj):
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

class Bash:
    def __init__(self):
        self.p = subprocess.Popen(["/bin/bash", "--noprofile", "--norc"], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, start_new_session=True)
        self.chunks = queue.Queue()
        for name, f in (("stdout", self.p.stdout), ("stderr", self.p.stderr)):
            threading.Thread(target=self.read, args=(name, f), daemon=True).start()
        self.send("trap ':' INT\n")

    def read(self, name, f):
        while True:
            data = os.read(f.fileno(), 65536)
            self.chunks.put((name, data))
            if not data:
                return

    def send(self, text):
        self.p.stdin.write(text.encode())
        self.p.stdin.flush()

    def run(self, code, env):
        mark = "__E2B_END_" + secrets.token_hex(8)
        script = []
        for k, v in env.items():
            # declare -p gives back the variable as it was (or nothing: it was unset).
            script.append("__e2b_saved_%s=$(declare -p %s 2>/dev/null); export %s=%s" % (k, k, k, shlex.quote(v)))
        # stdin is not the run's: reading it would eat the lines below.
        script.append("__e2b_code=$(cat <<'%s'\n%s\n%s\n)" % (mark, code, mark))
        script.append('eval "$__e2b_code" </dev/null')
        script.append("__e2b_status=$?")
        for k in env:
            script.append('unset %s; eval "$__e2b_saved_%s"; unset __e2b_saved_%s' % (k, k, k))
        script.append("printf '%s %%d\\n' \"$__e2b_status\"; printf '%s\\n' >&2" % (mark, mark))
        try:
            self.send("\n".join(script) + "\n")
        except BrokenPipeError:
            pass
        pending = {"stdout": b"", "stderr": b""}
        done = {"stdout": False, "stderr": False}
        status = None
        marker = mark.encode()
        while not all(done.values()):
            name, data = self.chunks.get()
            if not data:
                # bash exited during the run.
                done[name] = True
                if pending[name]:
                    emit(name, pending[name])
                    pending[name] = b""
                continue
            buf = pending[name] + data
            i = buf.find(marker)
            if i >= 0:
                emit(name, buf[:i])
                rest = buf[i + len(marker):]
                if b"\n" not in rest:
                    # The status that follows the marker is still to come.
                    pending[name] = buf[i:]
                    continue
                if name == "stdout":
                    status = int(rest.split(b"\n", 1)[0].strip() or b"0")
                pending[name] = b""
                done[name] = True
                continue
            # Held back: the start of a marker that the next chunk completes.
            keep = len(marker) - 1
            emit(name, buf[:-keep] if len(buf) > keep else b"")
            pending[name] = buf[-keep:] if len(buf) > keep else buf
        return status

def emit(name, data):
    if not data:
        return
    text = data.decode("utf-8", "replace")
    for i in range(0, len(text), PIECE):
        out({"type": name, "text": text[i:i + PIECE]})

requests = queue.Queue()
bash = Bash()

def read_requests():
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("interrupt"):
            try:
                os.killpg(bash.p.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        else:
            requests.put(req)
    requests.put(None)

threading.Thread(target=read_requests, daemon=True).start()
out({"type": "ready"})
count = 0

while True:
    req = requests.get()
    if req is None:
        break
    if req.get("restart"):
        bash.p.kill()
        bash = Bash()
        count = 0
    else:
        count += 1
        out({"type": "number_of_executions", "execution_count": count})
        env = req.get("env") or {}
        bad = [k for k in env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)]
        if bad:
            out({"type": "error", "name": "ValueError", "value": "not a shell variable name: %s" % bad[0], "traceback": ""})
            out({"type": "end_of_execution"})
            continue
        status = bash.run(req["code"], env)
        if status is None:
            out({"type": "error", "name": "KernelDied", "value": "bash exited; a new one was started and its state is gone", "traceback": ""})
            bash = Bash()
        elif status != 0:
            out({"type": "error", "name": "", "value": str(status), "traceback": ""})
    out({"type": "end_of_execution"})

try:
    os.killpg(bash.p.pid, signal.SIGKILL)
except ProcessLookupError:
    pass
`;
