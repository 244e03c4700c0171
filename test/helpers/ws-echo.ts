/**
 * A WebSocket echo server in Python for inside a sandbox (written to a file, run as `python3 <file> <port>`):
 * answers each text or binary frame with "echo: " and the payload, and a close with a close.
 */
export const WS_ECHO = `
import base64, hashlib, socket, struct, sys, threading
def handle(c):
    data = b""
    while b"\\r\\n\\r\\n" not in data:
        chunk = c.recv(4096)
        if not chunk: return
        data += chunk
    head = data.split(b"\\r\\n\\r\\n")[0].decode()
    key = [l.split(":", 1)[1].strip() for l in head.split("\\r\\n") if l.lower().startswith("sec-websocket-key:")][0]
    accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    c.sendall(("HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: %s\\r\\n\\r\\n" % accept).encode())
    def exact(n):
        b = b""
        while len(b) < n:
            chunk = c.recv(n - len(b))
            if not chunk: raise EOFError()
            b += chunk
        return b
    try:
        while True:
            h = exact(2); op = h[0] & 15; n = h[1] & 127
            if n == 126: n = struct.unpack(">H", exact(2))[0]
            elif n == 127: n = struct.unpack(">Q", exact(8))[0]
            mask = exact(4); payload = bytes(b ^ mask[i % 4] for i, b in enumerate(exact(n)))
            if op == 8:
                c.sendall(b"\\x88\\x00"); return
            if op in (1, 2):
                reply = b"echo: " + payload
                c.sendall(bytes([128 | op]) + (bytes([len(reply)]) if len(reply) < 126 else b"\\x7e" + struct.pack(">H", len(reply))) + reply)
    except EOFError:
        pass
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
while True:
    conn, _ = s.accept(); threading.Thread(target=handle, args=(conn,), daemon=True).start()
`;
