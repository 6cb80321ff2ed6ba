// highlight.js core with only the languages the server runs (and the data formats their workspaces hold), so the
// bundle stays small and nothing is fetched at run time.
import hljs from 'highlight.js/lib/core';
import python from 'highlight.js/lib/languages/python';
import javascript from 'highlight.js/lib/languages/javascript';
import typescript from 'highlight.js/lib/languages/typescript';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import bash from 'highlight.js/lib/languages/bash';
import json from 'highlight.js/lib/languages/json';
import xml from 'highlight.js/lib/languages/xml';
import markdown from 'highlight.js/lib/languages/markdown';
import yaml from 'highlight.js/lib/languages/yaml';
import 'highlight.js/styles/github.css';

hljs.registerLanguage('python', python);
hljs.registerLanguage('javascript', javascript);
hljs.registerLanguage('typescript', typescript);
hljs.registerLanguage('go', go);
hljs.registerLanguage('java', java);
hljs.registerLanguage('bash', bash);
hljs.registerLanguage('json', json);
hljs.registerLanguage('xml', xml);
hljs.registerLanguage('markdown', markdown);
hljs.registerLanguage('yaml', yaml);

const BY_EXTENSION = {
  py: 'python', js: 'javascript', mjs: 'javascript', cjs: 'javascript', ts: 'typescript', go: 'go',
  java: 'java', sh: 'bash', bash: 'bash', json: 'json', xml: 'xml', html: 'xml', svg: 'xml', md: 'markdown',
  yml: 'yaml', yaml: 'yaml',
};

const BY_RUNTIME = { python: 'python', nodejs: 'javascript', typescript: 'typescript', go: 'go', java: 'java',
  bash: 'bash', shell: 'bash' };

export function languageOfFile(name) {
  const dot = name.lastIndexOf('.');
  return dot < 0 ? null : BY_EXTENSION[name.slice(dot + 1).toLowerCase()] || null;
}

export function languageOfRuntime(runtime) {
  return BY_RUNTIME[runtime] || null;
}

/** HTML for `v-html`: highlight.js escapes the text itself; unknown languages get plain escaping. */
export function highlight(text, language) {
  if (language && hljs.getLanguage(language)) return hljs.highlight(text, { language, ignoreIllegals: true }).value;
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
