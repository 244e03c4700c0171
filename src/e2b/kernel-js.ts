/**
 * The code interpreter's JavaScript and TypeScript kernel: a small kernel of our own, run
 * inside the sandbox with the host's /usr/bin/node, speaking the same JSON lines as the
 * Python bridge (kernel-bridge.ts): in `{"code", "env"}`, `{"restart": true}`,
 * `{"interrupt": true}`; out stdout/stderr/result/error/number_of_executions lines, then
 * `end_of_execution`; `ready` once it can run code.
 *
 * This process only relays: the code runs in a child node process (KERNEL_JS_CHILD), so a
 * restart is a fresh child (nothing of the old globals is left), and a child that dies
 * (`process.exit()` in a cell, a crash) is reported as an error and replaced.
 *
 * argv: cwd, language (javascript | typescript), the child's source (KERNEL_JS_CHILD).
 */
export const KERNEL_JS = String.raw`
const { spawn } = require("node:child_process");
const readline = require("node:readline");

const [cwd, language, childSource] = process.argv.slice(1);
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
let child, ready = false, running = false, count = 0, pending = [];

function start() {
  return new Promise((resolve) => {
    child = spawn(process.execPath, ["-e", childSource, language], { cwd, stdio: ["ignore", "pipe", "pipe", "ipc"], env: process.env });
    const c = child;
    // What the child's own subprocesses write to the inherited descriptors.
    c.stdout.on("data", (d) => running && out({ type: "stdout", text: d.toString() }));
    c.stderr.on("data", (d) => running && out({ type: "stderr", text: d.toString() }));
    c.on("message", (m) => {
      if (m.type === "ready") return resolve();
      if (m.type === "done") return finish();
      if (running) out(m);
    });
    c.on("exit", (code, signal) => {
      if (c !== child) return;
      if (running) {
        out({ type: "error", name: "KernelDied", value: "the kernel exited (" + (signal ?? "code " + code) + "); it was restarted and its state is gone", traceback: "" });
        start().then(finish);
      }
    });
  });
}

function finish() {
  running = false;
  // Byte for byte as the Python bridge writes it: the service matches this line exactly.
  process.stdout.write('{"type": "end_of_execution"}\n');
  next();
}

async function next() {
  if (!ready || running || !pending.length) return;
  const req = pending.shift();
  running = true;
  if (req.restart) {
    const old = child;
    child = undefined;
    old.kill("SIGKILL");
    count = 0;
    await start();
    return finish();
  }
  out({ type: "number_of_executions", execution_count: ++count });
  child.send({ code: req.code, env: req.env || {} });
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const req = JSON.parse(line);
  if (req.interrupt) {
    if (running && child) child.kill("SIGINT");
    return;
  }
  pending.push(req);
  next();
}).on("close", () => {
  child?.kill("SIGKILL");
  process.exit(0);
});

start().then(() => {
  ready = true;
  out({ type: "ready" });
  next();
});
`;

/**
 * The child that runs the cells, in its main realm (node's own globals, require and
 * import as in a script). Each cell is rewritten before it runs, as a notebook kernel for
 * JavaScript must: TypeScript's types are stripped (Debian's node-typescript), top-level
 * `const`/`let`/`var`/function/class declarations become globals so the next cell sees
 * them, static `import`s become dynamic ones, and the whole runs in an async function, so
 * top-level `await` works and the last expression statement is the cell's result.
 * The parsing is TypeScript's (it reads JavaScript too).
 */
export const KERNEL_JS_CHILD = String.raw`
const vm = require("node:vm");
const util = require("node:util");
const language = process.argv[1];
const PIECE = 65536;

function loadTypeScript() {
  for (const p of ["typescript", "/usr/share/nodejs/typescript", "/usr/lib/nodejs/typescript"]) {
    try { return require(p); } catch {}
  }
  return undefined;
}
const ts = loadTypeScript();

// Output in the order it was written, through the IPC channel (the results go the same way).
const send = (m) => process.send(m);
for (const name of ["stdout", "stderr"]) {
  process[name].write = (chunk, encoding, cb) => {
    const text = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString(typeof encoding === "string" ? encoding : "utf8");
    for (let i = 0; i < Math.max(text.length, 1); i += PIECE) send({ type: name, text: text.slice(i, i + PIECE) });
    if (typeof encoding === "function") encoding();
    else if (typeof cb === "function") cb();
    return true;
  };
}

globalThis.require = require("node:module").createRequire(process.cwd() + "/");
globalThis.__e2b_import = (specifier) => import(specifier);

function rewrite(code) {
  if (!ts) {
    if (language === "typescript") throw Object.assign(new Error("TypeScript needs Debian's node-typescript on the host (apt-get install node-typescript)"), { name: "KernelError" });
    return "(async () => {\n" + code + "\n})()";
  }
  if (language === "typescript") {
    code = ts.transpileModule(code, { reportDiagnostics: false, compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, verbatimModuleSyntax: true, preserveValueImports: true, isolatedModules: true } }).outputText;
    code = code.replace(/\nexport \{\};\s*$/, "\n");
  }
  const sf = ts.createSourceFile("cell.js", code, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  const text = (n) => code.slice(n.getStart(sf), n.end);
  // Dynamic import() anywhere in the cell: through the kernel's own loader.
  const edits = [];
  (function visit(n) {
    if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword) edits.push([n.expression.getStart(sf), n.expression.end, "__e2b_import"]);
    ts.forEachChild(n, visit);
  })(sf);
  const withEdits = (n) => {
    let s = code.slice(n.getStart(sf), n.end);
    const start = n.getStart(sf);
    for (const [a, b, r] of edits.filter(([a, b]) => a >= start && b <= n.end).sort((x, y) => y[0] - x[0])) s = s.slice(0, a - start) + r + s.slice(b - start);
    return s;
  };
  const hoisted = [], body = [];
  const statements = sf.statements;
  statements.forEach((st, i) => {
    const last = i === statements.length - 1;
    if (ts.isImportDeclaration(st)) {
      const from = text(st.moduleSpecifier);
      const clause = st.importClause;
      if (!clause) return body.push("await __e2b_import(" + from + ");");
      if (clause.isTypeOnly) return;
      const m = "__e2b_m" + i;
      body.push("const " + m + " = await __e2b_import(" + from + ");");
      if (clause.name) body.push(clause.name.text + " = " + m + ".default ?? " + m + ";");
      const b = clause.namedBindings;
      if (b && ts.isNamespaceImport(b)) body.push(b.name.text + " = " + m + ";");
      else if (b) for (const el of b.elements) if (!el.isTypeOnly) body.push(el.name.text + " = " + m + "[" + JSON.stringify((el.propertyName ?? el.name).text) + "];");
      return;
    }
    if (ts.isVariableStatement(st)) {
      for (const d of st.declarationList.declarations) {
        const target = withEdits(d.name);
        const value = d.initializer ? withEdits(d.initializer) : "undefined";
        body.push(ts.isObjectBindingPattern(d.name) ? "(" + target + " = " + value + ");" : target + " = " + value + ";");
      }
      return;
    }
    if (ts.isFunctionDeclaration(st) && st.name) return hoisted.push(st.name.text + " = " + withEdits(st) + ";");
    if (ts.isClassDeclaration(st) && st.name) return body.push(st.name.text + " = " + withEdits(st) + ";");
    if (last && ts.isExpressionStatement(st)) return body.push("return (" + withEdits(st.expression) + ");");
    body.push(withEdits(st));
  });
  return "(async () => {\n" + hoisted.join("\n") + "\n" + body.join("\n") + "\n})()";
}

function display(value) {
  if (value === undefined) return;
  // A string's text is the string itself (as E2B gives it), anything else node's inspection.
  send({ type: "result", is_main_result: true, text: typeof value === "string" ? value : util.inspect(value, { depth: 6 }), extra: {} });
}

function error(e) {
  if (e instanceof Error || (e && typeof e === "object" && "stack" in e)) send({ type: "error", name: e.name ?? "Error", value: e.message ?? String(e), traceback: String(e.stack ?? "").split("\n").filter((l) => !/^\s+at .*(node:|\[eval\])/.test(l)).join("\n") });
  else send({ type: "error", name: "Error", value: util.inspect(e), traceback: "" });
}

let interrupt = () => {};
process.on("SIGINT", () => interrupt());

process.on("message", async ({ code, env }) => {
  const saved = {};
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  try {
    const script = new vm.Script(rewrite(code), { filename: "cell", importModuleDynamically: vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER });
    const interrupted = new Promise((_, reject) => { interrupt = () => reject(Object.assign(new Error("interrupted"), { name: "KeyboardInterrupt", stack: "" })); });
    display(await Promise.race([script.runInThisContext({ breakOnSigint: true }), interrupted]));
  } catch (e) {
    error(e);
  } finally {
    interrupt = () => {};
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    send({ type: "done" });
  }
});

process.on("unhandledRejection", (e) => error(e));
send({ type: "ready" });
`;
