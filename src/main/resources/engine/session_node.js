'use strict';
// Node session runner: one interpreter whose global scope persists across calls, like a notebook kernel, with the
// semantics of a REPL: each call's code is evaluated by V8's own REPL mode (the one a browser's console uses,
// reached through the in-process inspector: no port is opened), so top-level declarations persist, `let`,
// `const` and `class` may be declared again by a later call, and top-level `await` keeps its declarations. Static
// `import` declarations become awaited dynamic imports resolved from the working directory. With --typescript
// each cell is first transpiled (types erased) by the installed `typescript` package. The call's completion value
// (awaited when it is a promise), its error and whether it was interrupted come back on the control channel.
// Protocol: docs/interpreter-protocol.md. Wrapped in a function so the runner's names never reach the user's code.
(function main() {
  const inspector = require('inspector');
  const path = require('path');
  const net = require('net');
  const util = require('util');
  const vm = require('vm');
  const Module = require('module');
  const { SourceMap } = Module;
  const { openChannel, send, parse, writeAllSync } = require('./codeexec_node.js');

  const typescript = process.argv[2] === '--typescript';
  const channel = openChannel();
  delete process.env.CODE_EXEC_PRELOAD;
  process.argv.splice(1);

  // The import loader below is marked experimental by Node: that is the runner's business, not the user's output.
  const emitWarning = process.emitWarning;
  process.emitWarning = function (warning, ...rest) {
    if (String(warning && warning.message !== undefined ? warning.message : warning).includes('USE_MAIN_CONTEXT_DEFAULT_LOADER')) return;
    return emitWarning.call(this, warning, ...rest);
  };

  // Where this Node strips types (ts-strip.js) its stripper is loaded now; the typescript package only when a cell
  // needs it (syntax the stripper refuses, or a syntax error: its diagnostics name the TypeScript line)
  const stripper = typescript ? require('./ts-strip.js') : null;
  let tsPackage = null;
  const typescriptPackage = () => tsPackage || (tsPackage = require('./ts-loader.js').loadTypescript(false).ts);
  if (typescript && stripper.available) stripper.preload();
  else if (typescript) typescriptPackage();
  const session = new inspector.Session();
  session.connect();
  let cells = 0;
  // Set while a call awaits a promise: a SIGINT then ends the wait.
  let interruptWait = null;

  // Between calls a SIGINT must not end the runner; during a cell, breakOnSigint takes it instead of this.
  const onSigint = () => {
    if (interruptWait !== null) interruptWait();
  };
  process.on('SIGINT', onSigint);
  // An error thrown later by a call's timer or left-over promise is reported, as Node would, but does not end the
  // session: it shows up in the output of whichever call is running (or the next one).
  process.on('uncaughtException', (error) => printError(error));
  process.on('unhandledRejection', (reason) => printError(reason));

  /**
   * require/module/exports resolving from the working directory, as in a script there, and the import function
   * cells call (the rewritten `import` declarations and `import(...)` expressions): a function compiled with the
   * main context's loader under a file name in the working directory, so specifiers resolve from there, for ES
   * modules and CommonJS alike.
   */
  function defineGlobals() {
    const filename = path.join(process.cwd(), '[session]');
    const sessionModule = new Module(filename, null);
    sessionModule.filename = filename;
    sessionModule.paths = Module._nodeModulePaths(process.cwd());
    sessionModule.loaded = true;
    const define = (name, value) =>
      Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
    define('require', Module.createRequire(filename));
    define('module', sessionModule);
    define('exports', sessionModule.exports);
    const loader = vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;
    define(IMPORT, loader
      ? new vm.Script('(specifier, options) => import(specifier, options)', { filename, importModuleDynamically: loader })
        .runInThisContext()
      : (specifier) => Promise.resolve().then(() => {
        const m = globalThis.require(specifier);
        return m && m.__esModule ? m : Object.assign(Object.create(null), m, { default: m });
      }));
    // The cell's evaluation, called by a script run with breakOnSigint so that a SIGINT can stop a busy cell.
    Object.defineProperty(globalThis, EVALUATE, { value: () => evaluating(), enumerable: false });
  }

  /** How cells reach the import function; a name no program uses by chance. */
  const IMPORT = '__codeexec_import__';
  const EVALUATE = Symbol.for('codeexec.evaluate');
  let evaluating = null;
  const evaluateScript = new vm.Script('globalThis[Symbol.for("codeexec.evaluate")]()', { filename: 'codeexec-evaluate' });

  /** Sends one inspector command; its answer as a promise. */
  function post(method, params) {
    return new Promise((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))));
  }

  let handed;
  Object.defineProperty(globalThis, Symbol.for('codeexec.hand'), { value: (value) => { handed = value; }, enumerable: false });
  defineGlobals();

  /**
   * The value an inspector RemoteObject stands for, boxed ({value}): an async function returning a promise would
   * wait for it.
   */
  async function valueOf(remote) {
    if (remote.objectId) {
      handed = undefined;
      await post('Runtime.callFunctionOn', { objectId: remote.objectId,
        functionDeclaration: 'function () { globalThis[Symbol.for("codeexec.hand")](this); }' });
      return { value: handed };
    }
    if ('unserializableValue' in remote) {
      const u = remote.unserializableValue;
      return { value: u.endsWith('n') ? BigInt(u.slice(0, -1)) : Number(u) };
    }
    return { value: remote.type === 'undefined' ? undefined : remote.value };
  }

  /**
   * Evaluates one cell in REPL mode: its synchronous part runs inside the inspector call, within a script run with
   * breakOnSigint (so an interrupt stops a busy loop there); the answer, which waits for a top-level await, is
   * awaited interruptibly. Returns {value}: the completion value, boxed so that a promise is not awaited here (the
   * caller awaits it interruptibly); throws what the cell threw.
   */
  async function evaluate(code, name) {
    let answer;
    evaluating = () => {
      answer = post('Runtime.evaluate', { expression: code + '\n//# sourceURL=' + name, replMode: true, objectGroup: 'cell' });
    };
    try {
      evaluateScript.runInThisContext({ breakOnSigint: true });
    } finally {
      evaluating = null;
    }
    try {
      const r = await awaitInterruptibly(answer);
      if (r.exceptionDetails) {
        const thrown = r.exceptionDetails.exception ? (await valueOf(r.exceptionDetails.exception)).value : new Error(r.exceptionDetails.text);
        throw thrown instanceof SyntaxError ? located(thrown, r.exceptionDetails, code, name) : thrown;
      }
      return await valueOf(r.result);
    } finally {
      post('Runtime.releaseObjectGroup', { objectGroup: 'cell' }).catch(() => {});
    }
  }

  /** A syntax error as Node prints one for a file: where, the line, a caret, then the message. */
  function located(error, details, code, name) {
    if (typeof error.stack === 'string' && error.stack.includes('\n    at ') && !error.stack.includes('node:inspector')) return error;
    // An error at the end of the input is reported on the sourceURL line the runner appended: the cell's last line.
    const lines = code.split('\n');
    const at = Math.min(details.lineNumber, lines.length - 1);
    const column = at < details.lineNumber ? lines[at].length : details.columnNumber;
    const where = name + ':' + (at + 1) + '\n' + lines[at] + '\n' + ' '.repeat(column) + '^\n\n';
    try {
      error.stack = where + error.name + ': ' + error.message;
    } catch (e) {
      // A frozen error keeps its stack.
    }
    return error;
  }

  /**
   * The module syntax a REPL cannot evaluate, as code it can: `import x, { a, b as c } from "m"` becomes
   * `const { default: x, a, b: c } = await __codeexec_import__("m")` (`* as ns` the whole namespace, a bare
   * `import "m"` only the import), `import(` calls the same function, and `export` in front of a declaration is
   * dropped. Each rewritten declaration keeps its line count, so line numbers in errors stay the cell's.
   */
  function rewriteModuleSyntax(code) {
    if (!/\b(import|export)\b/.test(code)) return code;
    const declaration = /^([ \t]*)import(?=[\s{*'"])([^;'"`]*?)(['"])([^'"\n]+)\3([ \t]*(?:with|assert)[ \t]*(\{[^}]*\}))?[ \t]*;?/gm;
    let out = code.replace(declaration, (all, indent, clause, quote, specifier, attributesPart, attributes) => {
      const lines = '\n'.repeat((all.match(/\n/g) || []).length);
      const call = IMPORT + '(' + JSON.stringify(specifier) + (attributes ? ', { with: ' + attributes + ' }' : '') + ')';
      const bindings = importBindings(clause.replace(/\bfrom\s*$/, '').trim());
      if (bindings === null) return all;
      return indent + (bindings === '' ? 'void await ' + call + ';' : 'const ' + bindings(call) + ';') + lines;
    });
    out = out.replace(/(^|[^\w$.])import(\s*\()/gm, '$1' + IMPORT + '$2');
    return out.replace(/^([ \t]*)export[ \t]+(?=(?:default[ \t]+)?(?:const|let|var|function|async|class)\b)(?:default[ \t]+)?/gm, '$1');
  }

  /** The bindings of an import clause as a declaration taking the import call; '' for none, null if not a clause. */
  function importBindings(clause) {
    if (clause === '') return '';
    const m = /^(?:([\w$]+)\s*(?:,\s*|$))?(?:\*\s*as\s+([\w$]+)|\{([^}]*)\})?$/.exec(clause);
    if (m === null || (!m[1] && !m[2] && m[3] === undefined)) return null;
    const [, defaultName, namespace, named] = m;
    if (namespace) return (call) => namespace + ' = await ' + call + (defaultName ? ', ' + defaultName + ' = ' + namespace + '.default' : '');
    const parts = defaultName ? ['default: ' + defaultName] : [];
    for (const spec of (named || '').split(',').map((p) => p.trim()).filter(Boolean)) {
      const as = /^(\S+)\s+as\s+([\w$]+)$/.exec(spec);
      parts.push(as ? as[1] + ': ' + as[2] : spec);
    }
    return (call) => '{ ' + parts.join(', ') + ' } = await ' + call;
  }

  /** The source maps of the latest TypeScript cells, by cell name: errors show the lines of the TypeScript. */
  const sourceMaps = new Map();

  /** A stack's `<cell-N>:line:column` places, in the TypeScript a cell was written in. */
  function mapToTypescript(stack) {
    if (sourceMaps.size === 0) return stack;
    return stack.replace(/(<cell-\d+>):(\d+):(\d+)/g, (all, name, line, column) => {
      const map = sourceMaps.get(name);
      const entry = map ? map.findEntry(Number(line) - 1, Number(column) - 1) : null;
      return entry && entry.originalLine !== undefined ? name + ':' + (entry.originalLine + 1) + ':' + (entry.originalColumn + 1) : all;
    });
  }

  /**
   * A TypeScript cell as JavaScript (types erased; imports kept as written), or throws its syntax errors. Node's
   * stripper when it takes the cell (blanks where the types were: the lines stay; code it generates comes with a
   * source map), else the typescript package.
   */
  function transpile(code, name) {
    if (stripper.available) {
      const out = stripper.cell(code, name + '.ts');
      if (out !== null) {
        const inline = /\n\/\/# sourceMappingURL=data:application\/json;base64,([A-Za-z0-9+/=]+)\s*$/.exec(out.js);
        sourceMaps.delete(name);
        if (!inline) return out.js;
        sourceMaps.set(name, new SourceMap(JSON.parse(Buffer.from(inline[1], 'base64').toString('utf8'))));
        if (sourceMaps.size > 1000) sourceMaps.delete(sourceMaps.keys().next().value);
        return out.js.slice(0, inline.index) + '\n';
      }
    }
    const ts = typescriptPackage();
    const out = ts.transpileModule(code, {
      fileName: name + '.ts',
      reportDiagnostics: true,
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true,
        sourceMap: true },
    });
    const errors = (out.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error);
    if (errors.length > 0) {
      const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => process.cwd(), getNewLine: () => '\n' };
      const error = new SyntaxError(ts.flattenDiagnosticMessageText(errors[0].messageText, '\n'));
      error.stack = ts.formatDiagnostics(errors, host).trimEnd() + '\n\nSyntaxError: ' + error.message;
      throw error;
    }
    if (out.sourceMapText) {
      sourceMaps.set(name, new SourceMap(JSON.parse(out.sourceMapText)));
      if (sourceMaps.size > 1000) sourceMaps.delete(sourceMaps.keys().next().value);
    }
    // A cell with imports is an ES module to TypeScript, which then ends it with `export {};`.
    return out.outputText.replace(/\nexport \{\};\s*$/, '\n').replace(/\n\/\/# sourceMappingURL=.*\s*$/, '\n');
  }

  function isThenable(value) {
    return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof value.then === 'function';
  }

  const INTERRUPTED = Symbol('interrupted');

  /** Awaits value, or stops waiting at a SIGINT (the promise itself cannot be cancelled; it settles unobserved). */
  function awaitInterruptibly(value) {
    return new Promise((resolve, reject) => {
      interruptWait = () => reject(INTERRUPTED);
      Promise.resolve(value).then(resolve, reject);
    }).finally(() => {
      interruptWait = null;
    });
  }

  function isInterruption(error) {
    return error === INTERRUPTED || (error !== null && typeof error === 'object' && error.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED');
  }

  /** Drops the runner's frames (this file and node:vm, always the outermost ones) from an error's stack. */
  function trimStack(error) {
    if (error === null || typeof error !== 'object' || typeof error.stack !== 'string') return;
    let lines = error.stack.split('\n');
    const cut = lines.findIndex((line) => /^\s+at /.test(line) &&
      (line.includes(__filename) || line.includes('(node:vm:') || line.includes('(node:inspector') || line.includes('codeexec-evaluate')));
    if (cut >= 0) lines = lines.slice(0, cut);
    // An awaited cell's frames end in the tick queue that resumed it: Node's plumbing, not the user's.
    while (lines.length > 1 && /^\s+at .*\(node:internal\/process\/task_queues/.test(lines[lines.length - 1])) lines.pop();
    const trimmed = mapToTypescript(lines.join('\n'));
    if (trimmed !== error.stack) {
      try {
        error.stack = trimmed;
      } catch (e) {
        // A frozen error keeps its stack.
      }
    }
  }

  function printError(error) {
    trimStack(error);
    let text;
    if (error !== null && typeof error === 'object' && typeof error.stack === 'string') {
      // inspect() shows extra properties (code, ...) but brackets a stack without frames; such a stack (a syntax
      // error: all its frames were the runner's) has nothing else worth showing.
      text = error.stack.includes('\n    at ') ? util.inspect(error) : error.stack;
    } else {
      text = 'Uncaught ' + util.inspect(error);
    }
    try {
      writeAllSync(2, text + '\n');
    } catch (e) {
      // stderr is gone: nothing more to do.
    }
  }

  function describe(error) {
    let line;
    if (error !== null && typeof error === 'object' && typeof error.stack === 'string') {
      const name = error.code && String(error.name) === 'Error' ? 'Error [' + error.code + ']' : String(error.name);
      line = error.message ? name + ': ' + error.message : name;
    } else {
      line = 'Uncaught ' + util.inspect(error);
    }
    return line.replace(/\s*\n\s*/g, ' ');
  }

  /** {name, value, traceback} of a failed cell, as a notebook reports it (the stack after printError trimmed it). */
  function errorInfo(error) {
    if (error !== null && typeof error === 'object' && typeof error.stack === 'string') {
      return { name: String(error.name), value: String(error.message ?? ''), traceback: error.stack };
    }
    const text = util.inspect(error);
    return { name: 'Uncaught', value: text, traceback: 'Uncaught ' + text };
  }

  async function call(message) {
    cells += 1;
    const response = { id: message.id, result: null, error: null, errorInfo: null, interrupted: false, figures: [],
      executionCount: cells };
    // V8 ends a sourceURL at a space, so a Node cell is <cell-N> where a Python cell is <cell N>.
    const name = '<cell-' + cells + '>';
    try {
      let code = String(message.code || '');
      if (typescript) code = transpile(code, name);
      let { value } = await evaluate(rewriteModuleSyntax(code), name);
      if (isThenable(value)) value = await awaitInterruptibly(value);
      // As a REPL shows a value; a string as its text, which is what a model reading the result wants.
      if (value !== undefined) response.result = typeof value === 'string' ? value : util.inspect(value);
    } catch (error) {
      if (isInterruption(error)) {
        response.interrupted = true;
        response.error = 'Interrupted';
        // breakOnSigint's error is printed like any error a script throws; a wait that was given up threw nothing.
        if (error !== INTERRUPTED) printError(error);
      } else {
        response.error = describe(error);
        printError(error);
        response.errorInfo = errorInfo(error);
      }
    }
    return response;
  }

  function finish(response) {
    // Output to pipes is synchronous in Node on Linux: everything the call printed is already written.
    for (const fd of [1, 2]) {
      try {
        writeAllSync(fd, response.id);
      } catch (e) {
        // The user closed it; the server sees that stream end.
      }
    }
    send(channel, response);
  }

  // Messages are handled one at a time, in order; the reader keeps the event loop alive between calls.
  const queue = [];
  let busy = false;
  async function pump() {
    if (busy) return;
    busy = true;
    while (queue.length > 0) {
      const message = queue.shift();
      if (typeof message.id !== 'string' || !/^[0-9a-f]{32}$/.test(message.id)) process.exit(2);
      finish(await call(message));
      // A cell may have removed the listener; between calls a SIGINT must never end the runner.
      if (!process.listeners('SIGINT').includes(onSigint)) process.on('SIGINT', onSigint);
    }
    busy = false;
  }

  const reader = new net.Socket({ fd: channel.in, readable: true, writable: false });
  let pending = '';
  reader.setEncoding('utf8');
  reader.on('data', (chunk) => {
    pending += chunk;
    let newline;
    while ((newline = pending.indexOf('\n')) >= 0) {
      queue.push(parse(pending.slice(0, newline)));
      pending = pending.slice(newline + 1);
    }
    pump();
  });
  reader.on('end', () => process.exit(0));
  reader.on('error', () => process.exit(0));
  send(channel, { ready: true });
})();
