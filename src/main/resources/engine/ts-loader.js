'use strict';
// Runs a TypeScript file: transpile with the installed `typescript` package (type-erasure only, no type
// check: about ten times faster than tsc) and run the result as the main CommonJS module, so that
// require() resolves relative to the code file and process.argv looks like `node file args...`.
// Wrapped in a function so the loader's own names never clash with the user's.
(function main() {
  const fs = require('fs');
  const path = require('path');
  const Module = require('module');
  const vm = require('vm');
  // typescript.js is 9 MB of JavaScript: compiling it is most of a run's time. A V8 code cache next to this file,
  // made by the language's warm-up at server start (outside the sandbox, CODE_EXEC_WRITE_TS_CACHE=<output file>),
  // halves that. V8 checks the cache against the source and its own version and rejects a stale one: then a run
  // is merely slower.
  const cacheFile = path.join(__dirname, 'typescript.v8cache');
  const writeCache = process.env.CODE_EXEC_WRITE_TS_CACHE || '';
  let tsPath;
  try {
    tsPath = require.resolve('typescript');
  } catch (e) {
    process.stderr.write('typescript is not installed (npm install -g typescript)\n');
    process.exit(127);
  }
  let ts;
  let script;
  {
    let cachedData;
    if (!writeCache) {
      try {
        cachedData = fs.readFileSync(cacheFile);
      } catch (e) {
        cachedData = undefined;
      }
    }
    script = new vm.Script(Module.wrap(fs.readFileSync(tsPath, 'utf8')), { filename: tsPath, cachedData });
    const tsModule = new Module(tsPath, null);
    tsModule.filename = tsPath;
    tsModule.paths = Module._nodeModulePaths(path.dirname(tsPath));
    script.runInThisContext().call(tsModule.exports, tsModule.exports, Module.createRequire(tsPath), tsModule,
      tsPath, path.dirname(tsPath));
    ts = tsModule.exports;
  }
  const file = path.resolve(process.argv[2]);
  const source = fs.readFileSync(file, 'utf8');
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
  if (writeCache) {
    // After one transpile the lazily compiled functions are in the cache too.
    try {
      fs.writeFileSync(writeCache, script.createCachedData());
    } catch (e) {
      process.stderr.write('cannot write the TypeScript code cache: ' + e.message + '\n');
    }
  }
  const errors = (out.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (errors.length > 0) {
    const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => process.cwd(), getNewLine: () => '\n' };
    process.stderr.write(ts.formatDiagnostics(errors, host));
    process.exit(1);
  }
  process.argv.splice(1, 2, file);
  const m = new Module(file, null);
  m.filename = file;
  m.paths = Module._nodeModulePaths(path.dirname(file));
  process.mainModule = m;
  require.main = m;
  m.id = '.';
  m._compile(out.outputText, file);
})();
