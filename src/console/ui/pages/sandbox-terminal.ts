import { html } from "htm/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../api";
import { keySequence } from "../terminal-keys";
import { TerminalScreen } from "../terminal-screen";
import { ErrorNote } from "../widgets";

/**
 * A sandbox's shell over the terminal WebSocket (src/e2b/terminal.ts): a ticket from the
 * API with the signed-in key, then the socket. Input is a line at a time (the command
 * field; Enter sends it with a carriage return), plus Ctrl-C and Tab keys as buttons, so
 * the terminal is usable with a keyboard and a screen reader alike; or, with "Type in
 * the terminal", keys go to the shell as typed (arrows, Ctrl-keys, paste) while the
 * output has the focus. Tab is never captured, so the focus can always leave.
 */
export function SandboxTerminal({ sandboxId }: { sandboxId: string }) {
  const [state, setState] = useState<"closed" | "connecting" | "open">("closed");
  const [output, setOutput] = useState("");
  const [error, setError] = useState<string>();
  const [exit, setExit] = useState<number>();
  const [direct, setDirect] = useState(false);
  const socket = useRef<WebSocket | undefined>(undefined);
  const outRef = useRef<HTMLPreElement>(null);

  useEffect(() => () => socket.current?.close(), []);
  useEffect(() => {
    const el = outRef.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [output]);

  const connect = async () => {
    setError(undefined);
    setExit(undefined);
    setState("connecting");
    try {
      const { ticket } = await api<{ ticket: string }>(`/sandboxes/${encodeURIComponent(sandboxId)}/terminal/tickets`, { method: "POST" });
      const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/sandboxes/${encodeURIComponent(sandboxId)}/terminal?ticket=${encodeURIComponent(ticket)}`);
      ws.binaryType = "arraybuffer";
      const screen = new TerminalScreen();
      const decoder = new TextDecoder();
      socket.current = ws;
      ws.onopen = () => {
        setState("open");
        ws.send(JSON.stringify({ type: "resize", cols: 120, rows: 30 }));
      };
      ws.onmessage = (e) => {
        if (typeof e.data === "string") {
          const m = JSON.parse(e.data) as { type: string; exitCode?: number };
          if (m.type === "exit") setExit(m.exitCode);
          return;
        }
        screen.write(decoder.decode(e.data as ArrayBuffer, { stream: true }));
        setOutput(screen.text());
      };
      ws.onclose = (e) => {
        setState("closed");
        if (e.code !== 1000 && e.code !== 1005) setError(`terminal closed: ${e.reason || `code ${e.code}`}`);
      };
    } catch (e) {
      setState("closed");
      setError((e as Error).message);
    }
  };

  const send = (data: string) => socket.current?.readyState === WebSocket.OPEN && socket.current.send(JSON.stringify({ type: "input", data }));
  const onKey = (e: KeyboardEvent) => {
    if (!direct) return;
    const seq = keySequence(e);
    if (seq === undefined) return;
    e.preventDefault();
    send(seq);
  };
  const onPaste = (e: ClipboardEvent) => {
    if (!direct) return;
    e.preventDefault();
    send(e.clipboardData?.getData("text") ?? "");
  };
  const submit = (e: Event) => {
    e.preventDefault();
    const input = (e.target as HTMLFormElement).elements.namedItem("terminal-command") as HTMLInputElement;
    send(`${input.value}\r`);
    input.value = "";
  };

  return html`<section aria-labelledby="terminal-title" class="panel">
    <h3 id="terminal-title">Terminal</h3>
    <${ErrorNote} message=${error} />
    ${state === "closed"
      ? html`<p class="controls"><button type="button" onClick=${connect}>${output ? "Reconnect" : "Open a terminal"}</button>${exit !== undefined ? html`<span class="muted">The shell exited with code ${exit}.</span>` : null}</p>`
      : html`<p class="controls"><button type="button" onClick=${() => socket.current?.close(1000)}>Close the terminal</button><span class="muted" role="status">${state === "open" ? "Connected" : "Connecting…"}</span></p>`}
    ${output || state !== "closed" ? html`<pre class=${`terminal ${direct ? "direct" : ""}`} ref=${outRef} role="log" aria-label=${direct ? "Terminal: keys typed here go to the shell" : "Terminal output"} aria-live="polite" tabindex="0" onKeyDown=${onKey} onPaste=${onPaste}>${output}</pre>` : null}
    ${state === "open"
      ? html`<form class="inline" onSubmit=${submit} aria-label="Terminal input">
          <label for="terminal-command">Command</label>
          <input id="terminal-command" name="terminal-command" autocomplete="off" spellcheck="false" class="wide" />
          <button type="submit">Run</button>
          <button type="button" onClick=${() => send("\x03")} aria-label="Send Control-C">Ctrl-C</button>
          <button type="button" onClick=${() => send("\t")} aria-label="Send Tab">Tab</button>
          <button type="button" aria-pressed=${direct} onClick=${() => { setDirect(!direct); if (!direct) outRef.current?.focus(); }}>Type in the terminal</button>
        </form>`
      : null}
  </section>`;
}
