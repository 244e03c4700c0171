/**
 * Just enough of a terminal to read a shell: printable text, CR/LF, backspace, erase in
 * line, cursor moves along the line and clear screen; every other escape sequence (colours,
 * titles, modes) is dropped. The console has no terminal library (no network at run time,
 * nothing beyond what the binary carries), and a shell's prompt and command output need
 * no more.
 */
const MAX_LINES = 2000;

export class TerminalScreen {
  lines: string[] = [""];
  private col = 0;
  /** An escape sequence cut between two messages. */
  private pending = "";

  write(text: string): void {
    let s = this.pending + text;
    this.pending = "";
    for (let i = 0; i < s.length; i++) {
      const ch = s[i];
      if (ch === "\x1b") {
        const rest = s.slice(i);
        const csi = /^\x1b\[([0-9;?]*)([ -/]*)([@-~])/.exec(rest);
        const osc = /^\x1b\][^\x07\x1b]*(\x07|\x1b\\)/.exec(rest);
        if (csi) {
          this.control(csi[1], csi[3]);
          i += csi[0].length - 1;
        } else if (osc) {
          i += osc[0].length - 1;
        } else if (/^\x1b(\[[0-9;?]*[ -/]*|\][^\x07\x1b]*|\x1b?|[()*+])$/.test(rest)) {
          this.pending = rest;
          return;
        } else {
          // Charset designation (ESC ( B) takes two characters after ESC; keypad modes and the rest one.
          i += /^\x1b[()*+]/.test(rest) ? 2 : 1;
        }
      } else if (ch === "\n") this.newLine();
      else if (ch === "\r") this.col = 0;
      else if (ch === "\b") this.col = Math.max(0, this.col - 1);
      else if (ch === "\t") this.put(" ".repeat(8 - (this.col % 8)));
      else if (ch >= " " && ch !== "\x7f") this.put(ch);
    }
  }

  text(): string {
    return this.lines.join("\n");
  }

  private get line(): string {
    return this.lines[this.lines.length - 1];
  }

  private set line(v: string) {
    this.lines[this.lines.length - 1] = v;
  }

  private put(s: string) {
    const l = this.line.padEnd(this.col, " ");
    this.line = l.slice(0, this.col) + s + l.slice(this.col + s.length);
    this.col += s.length;
  }

  private newLine() {
    this.lines.push("");
    this.col = 0;
    if (this.lines.length > MAX_LINES) this.lines.splice(0, this.lines.length - MAX_LINES);
  }

  private control(params: string, final: string) {
    const n = Number(params.replace(/^\?/, "").split(";")[0] || "0");
    if (final === "K") {
      if (n === 0) this.line = this.line.slice(0, this.col);
      else if (n === 2) this.line = "";
    } else if (final === "C") this.col += Math.max(1, n);
    else if (final === "D") this.col = Math.max(0, this.col - Math.max(1, n));
    else if (final === "G") this.col = Math.max(0, n - 1);
    else if (final === "J" && (n === 2 || n === 3)) {
      this.lines = [""];
      this.col = 0;
    } else if (final === "H" && !params) {
      // Cursor home after a clear: the next output starts a fresh screen.
      this.col = 0;
    }
  }
}
