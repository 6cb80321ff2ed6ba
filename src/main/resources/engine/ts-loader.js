'use strict';
// Runs a TypeScript file. Where the Node running it strips types itself (22.18 and later, ts-strip.js), as that Node
// runs a `.ts` file; otherwise, and for what it refuses: transpile with the installed `typescript` package
// (type-erasure only, no type check: about ten times faster than tsc) and run the result as the main CommonJS module,
// so that require() resolves relative to the code file and process.argv looks like `node file args...`.
// Also a module: the warm TypeScript runner (warm_node.js --typescript) loads the transpiler with it ahead of the
// code. The loader's names live in this module's scope and never clash with the user's.
const fs = require('fs');
const path = require('path');
const Module = require('module');
const vm = require('vm');
const { isAscii } = require('buffer');

/**
 * The `typescript` package, compiled with the V8 code cache beside this file. typescript.js is 9 MB of
 * JavaScript: compiling it is most of a cold run's time. The cache is made by the language's warm-up at server
 * start (outside the sandbox, CODE_EXEC_WRITE_TS_CACHE=<output file>) and halves that. V8 checks the cache against
 * the source and its own version and rejects a stale one: then a run is merely slower.
 */
function loadTypescript(writeCache) {
  const cacheFile = path.join(__dirname, 'typescript.v8cache');
  let tsPath;
  try {
    tsPath = require.resolve('typescript');
  } catch (e) {
    process.stderr.write('typescript is not installed (npm install -g typescript)\n');
    process.exit(127);
  }
  let cachedData;
  if (!writeCache) {
    try {
      cachedData = fs.readFileSync(cacheFile);
    } catch (e) {
      cachedData = undefined;
    }
  }
  const script = new vm.Script(Module.wrap(readSource(tsPath)), { filename: tsPath, cachedData });
  const tsModule = new Module(tsPath, null);
  tsModule.filename = tsPath;
  tsModule.paths = Module._nodeModulePaths(path.dirname(tsPath));
  script.runInThisContext().call(tsModule.exports, tsModule.exports, Module.createRequire(tsPath), tsModule,
    tsPath, path.dirname(tsPath));
  return { ts: tsModule.exports, script };
}

/**
 * A source file's text. typescript.js is ASCII: its bytes are then taken as Latin-1, the same string without the
 * UTF-8 decoder's pass over 9 MB (about 11 ms of each TypeScript start here); any other file is decoded as UTF-8.
 */
function readSource(file) {
  const bytes = fs.readFileSync(file);
  return typeof isAscii === 'function' && isAscii(bytes) ? bytes.latin1Slice(0, bytes.length) : bytes.toString('utf8');
}

/**
 * The JavaScript of one file as CommonJS with its inline source map, and the diagnostics that are errors (a syntax
 * error: the JavaScript is then not to be run).
 */
function compile(ts, file, source) {
  const out = ts.transpileModule(source, {
    fileName: file,
    reportDiagnostics: true,
    compilerOptions: {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      esModuleInterop: true,
      inlineSourceMap: true,
    },
  });
  return { js: out.outputText, errors: (out.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error) };
}

/** The JavaScript of one file; on a syntax error, the diagnostics on stderr and exit 1 (no user code ran). */
function transpile(ts, file, source) {
  const { js, errors } = compile(ts, file, source);
  if (errors.length > 0) {
    const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => process.cwd(), getNewLine: () => '\n' };
    process.stderr.write(ts.formatDiagnostics(errors, host));
    process.exit(1);
  }
  return js;
}

/**
 * The JavaScript the server made of the file ahead of the run (warm/TypeScriptStrippers), named by
 * CODE_EXEC_TS_JS; null when there is none. The variable is the runner's, not the program's: removed either way.
 */
function prepared() {
  const given = process.env.CODE_EXEC_TS_JS;
  delete process.env.CODE_EXEC_TS_JS;
  if (!given) return null;
  try {
    return fs.readFileSync(given, 'utf8');
  } catch (e) {
    return null;
  }
}

/** Runs JavaScript made of TypeScript as the file's main module, with its source map where it has one. */
function runJs(file, js) {
  if (js.includes('//# sourceMappingURL=data:')) process.setSourceMapsEnabled(true);
  process.argv.splice(1, 2, file);
  runAsMain(file, js);
}

/**
 * Where this Node strips types itself (ts-strip.js), the file runs as that Node runs a `.ts` file; returns false
 * when it is for the typescript package.
 */
function runStripped(file) {
  const stripper = require('./ts-strip.js');
  if (!stripper.available) return false;
  const plan = stripper.plan(fs.readFileSync(file, 'utf8'), file);
  if (plan.how === 'transpiler') return false;
  process.argv.splice(1, 2, file);
  if (plan.how === 'script') {
    process.setSourceMapsEnabled(true);
    runAsMain(file, plan.js);
  } else {
    stripper.run(file);
  }
  return true;
}

/** Compiles JavaScript as the main CommonJS module of {@code file}. */
function runAsMain(file, js) {
  const m = new Module(file, null);
  m.filename = file;
  m.paths = Module._nodeModulePaths(path.dirname(file));
  process.mainModule = m;
  require.main = m;
  m.id = '.';
  Module._cache[file] = m; // as Module._load has it: a require of the main file gets this module
  m._compile(js, file);
}

function main() {
  const writeCache = process.env.CODE_EXEC_WRITE_TS_CACHE || '';
  const file = path.resolve(process.argv[2]);
  const ready = writeCache ? null : prepared();
  if (ready !== null) return runJs(file, ready);
  if (!writeCache && runStripped(file)) return;
  const { ts, script } = loadTypescript(writeCache);
  const source = fs.readFileSync(file, 'utf8');
  const js = transpile(ts, file, source);
  // the inline source map: a stack names the TypeScript's lines
  process.setSourceMapsEnabled(true);
  if (writeCache) {
    // After one transpile the lazily compiled functions are in the cache too.
    try {
      fs.writeFileSync(writeCache, script.createCachedData());
    } catch (e) {
      process.stderr.write('cannot write the TypeScript code cache: ' + e.message + '\n');
    }
  }
  process.argv.splice(1, 2, file);
  runAsMain(file, js);
}

if (require.main === module) main();
else module.exports = { loadTypescript, compile, transpile };
