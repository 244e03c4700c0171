/** What a key sends to a terminal (xterm's sequences), or undefined for keys left to the browser. */
export function keySequence(e: { key: string; ctrlKey: boolean; altKey: boolean; metaKey: boolean }): string | undefined {
  if (e.metaKey) return undefined;
  const named: Record<string, string> = {
    Enter: "\r", Backspace: "\x7f", Escape: "\x1b", Delete: "\x1b[3~",
    ArrowUp: "\x1b[A", ArrowDown: "\x1b[B", ArrowRight: "\x1b[C", ArrowLeft: "\x1b[D", Home: "\x1b[H", End: "\x1b[F",
  };
  if (e.key in named) return named[e.key];
  if (e.key.length !== 1) return undefined; // Tab, F-keys, modifiers: Tab keeps moving the focus out.
  if (e.ctrlKey && /^[a-z@\[\\\]^_]$/i.test(e.key)) return String.fromCharCode(e.key.toUpperCase().charCodeAt(0) & 0x1f);
  return e.altKey ? `\x1b${e.key}` : e.key;
}
