// Database-independent: the console terminal's screen model, a pure function of the bytes a shell writes.
import { expect, test } from "bun:test";
import { keySequence } from "../../src/console/ui/terminal-keys";
import { TerminalScreen } from "../../src/console/ui/terminal-screen";

const screen = (...chunks: string[]) => {
  const s = new TerminalScreen();
  for (const c of chunks) s.write(c);
  return s.text();
};

test("text, CRLF and a bare CR that rewrites the line", () => {
  expect(screen("user@sandbox:~$ echo hi\r\nhi\r\n")).toBe("user@sandbox:~$ echo hi\nhi\n");
  expect(screen("50%\r100%")).toBe("100%");
  expect(screen("long line\rshort")).toBe("shortline");
});

test("backspace and erase to the end of the line (readline's editing)", () => {
  expect(screen("ab\b\x1b[K")).toBe("a");
  expect(screen("abc\b\bX")).toBe("aXc");
  expect(screen("abcdef\r\x1b[2K")).toBe("");
});

test("colours, titles, bracketed paste and other modes are dropped", () => {
  expect(screen("\x1b]0;user@sandbox: ~\x07\x1b[01;32muser@sandbox\x1b[00m:\x1b[01;34m~\x1b[00m$ \x1b[?2004h")).toBe("user@sandbox:~$ ");
  expect(screen("\x1b(Bplain\x1b=")).toBe("plain");
});

test("an escape sequence split between two messages is not printed", () => {
  expect(screen("red: \x1b[3", "1mtext\x1b", "[0m.")).toBe("red: text.");
  expect(screen("title \x1b]0;half", " a title\x07done")).toBe("title done");
});

test("cursor moves within the line, tabs, and a cleared screen", () => {
  expect(screen("abc\x1b[2Dx")).toBe("axc");
  expect(screen("a\tb")).toBe("a       b");
  expect(screen("old\r\nlines\x1b[H\x1b[2Jnew")).toBe("new");
});

test("keeps the last 2000 lines", () => {
  const s = new TerminalScreen();
  s.write(Array.from({ length: 2500 }, (_, i) => `line ${i}`).join("\r\n"));
  expect(s.lines.length).toBe(2000);
  expect(s.lines[0]).toBe("line 500");
});

test("keys typed into the terminal become what a terminal sends", () => {
  const key = (k: string, mods: Partial<{ ctrlKey: boolean; altKey: boolean; metaKey: boolean }> = {}) => keySequence({ key: k, ctrlKey: false, altKey: false, metaKey: false, ...mods });
  expect(["a", "Enter", "Backspace", "ArrowUp", "ArrowLeft"].map((k) => key(k))).toEqual(["a", "\r", "\x7f", "\x1b[A", "\x1b[D"]);
  expect(key("c", { ctrlKey: true })).toBe("\x03");
  expect(key("D", { ctrlKey: true })).toBe("\x04");
  expect(key("b", { altKey: true })).toBe("\x1bb");
  // Left to the browser: Tab (the focus must be able to leave), function keys, the Meta shortcuts.
  expect([key("Tab"), key("F5"), key("v", { metaKey: true }), key("Shift")]).toEqual([undefined, undefined, undefined, undefined]);
});
