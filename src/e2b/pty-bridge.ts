/**
 * A pseudo-terminal inside the sandbox: python3 (from the sandbox's own /usr) opens a
 * pty pair, runs the command on its slave side, and relays the master side to its
 * stdout. Its stdin carries frames: one type byte (0 data for the terminal, 1 resize
 * with cols and rows as two big-endian 16-bit numbers), a big-endian 32-bit length and
 * the payload, so keystrokes and resizes share one ordered pipe. It exits with the
 * command's exit code (128 + n for signal n).
 */
export const PTY_BRIDGE = String.raw`
import os, pty, select, struct, sys, fcntl, termios
cols, rows = int(sys.argv[1]), int(sys.argv[2])
pid, fd = pty.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[3], sys.argv[3:])
    finally:
        os._exit(127)
def resize(c, r):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", r, c, 0, 0))
def write_all(f, data):
    while data:
        data = data[os.write(f, data):]
resize(cols, rows)
buf = b""
stdin_open = True
while True:
    ready, _, _ = select.select([fd] + ([0] if stdin_open else []), [], [])
    if fd in ready:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            break
        write_all(1, data)
    if 0 in ready:
        chunk = os.read(0, 65536)
        if not chunk:
            stdin_open = False
            continue
        buf += chunk
        while len(buf) >= 5:
            kind, n = buf[0], struct.unpack(">I", buf[1:5])[0]
            if len(buf) < 5 + n:
                break
            payload, buf = buf[5:5 + n], buf[5 + n:]
            if kind == 0:
                write_all(fd, payload)
            elif kind == 1 and n == 4:
                resize(*struct.unpack(">HH", payload))
_, status = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(status)
sys.exit(128 - code if code < 0 else code)
`;

export function ptyArgv(cols: number, rows: number, argv: string[]): string[] {
  return ["python3", "-c", PTY_BRIDGE, String(cols), String(rows), ...argv];
}

export function ptyDataFrame(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + data.length);
  new DataView(out.buffer).setUint32(1, data.length);
  out[0] = 0;
  out.set(data, 5);
  return out;
}

export function ptyResizeFrame(cols: number, rows: number): Uint8Array {
  const out = new Uint8Array(9);
  const v = new DataView(out.buffer);
  out[0] = 1;
  v.setUint32(1, 4);
  v.setUint16(5, cols);
  v.setUint16(7, rows);
  return out;
}
