import { existsSync, readFileSync } from 'node:fs';
import { join, posix, relative } from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { REPO, walkFiles } from './manifests.support.js';

/**
 * The layer rules of docs/architecture.md ("Layers"), kept on the imports of every file that ships:
 * src/**\/*.ts but tests and testing helpers (what tsconfig.build.json leaves out). The table of
 * modules, their kinds and what each may import is read from the document itself, so the rules
 * and the test cannot drift apart: to allow an import, change the document.
 *
 * The imports are read twice. A scanner over the source text finds every import and
 * export-from statement and every import() with whether it is type-only; esbuild (a real parser,
 * bundling every file with the project's tsconfig: verbatimModuleSyntax keeps each import that is
 * not `import type`) gives the imports that run. The scanner must find exactly esbuild's runtime
 * imports, file by file, so that what it adds (the type-only ones) comes from a scanner proven on
 * the rest.
 */

type Kind = 'pure' | 'shared' | 'edge';
interface Row {
  key: string;
  kind: Kind;
  mayImport: string[];
}
interface ImportRef {
  spec: string;
  typeOnly: boolean;
  line: number;
}
interface Edge extends ImportRef {
  from: string;
  /** The file imported (src/...), or the package or builtin. */
  to: string;
}

const ARCHITECTURE = readFileSync(join(REPO, 'docs', 'architecture.md'), 'utf8');

/** The rows of the "Layers" table: | `src/x/` or `src/x/y.ts` | pure/shared/edge | `src/...` ... |. */
function layerTable(markdown: string): Row[] {
  const section = markdown.split(/^## /m).find((s) => s.startsWith('Layers'));
  if (!section) return [];
  return section
    .split('\n')
    .map((l) => /^\| `(src\/[\w./-]+)` \| (pure|shared|edge) \| (.*) \|$/.exec(l))
    .filter((m) => m !== null)
    .map((m) => ({
      key: m[1]!,
      kind: m[2] as Kind,
      mayImport: [...m[3]!.matchAll(/`(src\/[\w./-]+)`/g)].map((t) => t[1]!),
    }));
}

/**
 * The text with comments and the bodies of template literals blanked (newlines kept, so line
 * numbers hold): what is left of `import` and `from` is code. String literals stay (they hold the
 * specifiers); a regular expression literal is blanked too.
 */
function codeOnly(src: string): string {
  const out = src.split('');
  const blank = (a: number, b: number) => {
    for (let k = a; k < b; k++) if (out[k] !== '\n') out[k] = ' ';
  };
  const templates: number[] = []; // brace depth at each open `${`
  let depth = 0;
  let prev = ''; // the last significant character ('x' for a word)
  for (let i = 0; i < src.length; ) {
    const c = src[i]!;
    const next = src[i + 1];
    if (c === '/' && next === '/') {
      const end = src.indexOf('\n', i) < 0 ? src.length : src.indexOf('\n', i);
      blank(i, end);
      i = end;
    } else if (c === '/' && next === '*') {
      const close = src.indexOf('*/', i + 2);
      const end = close < 0 ? src.length : close + 2;
      blank(i, end);
      i = end;
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < src.length && src[j] !== c && src[j] !== '\n') j += src[j] === '\\' ? 2 : 1;
      i = j + 1;
      prev = c;
    } else if (c === '`' || (c === '}' && templates.at(-1) === depth)) {
      if (c === '}') templates.pop();
      let j = i + 1;
      while (j < src.length && src[j] !== '`' && !(src[j] === '$' && src[j + 1] === '{')) {
        j += src[j] === '\\' ? 2 : 1;
      }
      blank(i + 1, Math.min(j, src.length));
      if (src[j] === '$') {
        templates.push(depth);
        i = j + 2;
        prev = '{';
      } else {
        i = j + 1;
        prev = '`';
      }
    } else if (c === '/' && (prev === '' || '(,=:[!&|?{};+-*%<>~^'.includes(prev))) {
      let j = i + 1;
      for (let inClass = false; j < src.length && src[j] !== '\n'; j++) {
        if (src[j] === '\\') j++;
        else if (src[j] === '[') inClass = true;
        else if (src[j] === ']') inClass = false;
        else if (src[j] === '/' && !inClass) break;
      }
      blank(i, j + 1);
      i = j + 1;
      prev = 'x';
    } else {
      if (c === '{') depth++;
      else if (c === '}') depth--;
      if (!/\s/.test(c)) prev = /[\w$]/.test(c) ? 'x' : c;
      i++;
    }
  }
  return out.join('');
}

/** Every import of a source text: statements at the start of a line (as Biome formats them) and import(). */
function importsOf(src: string): ImportRef[] {
  const text = codeOnly(src);
  const lineAt = (index: number) => text.slice(0, index).split('\n').length;
  const out: ImportRef[] = [];
  for (const m of text.matchAll(/^(?:import|export)\s+(type\s+)?[^;'"=()]*?\bfrom\s*(['"])([^'"\n]+)\2/gm)) {
    out.push({ spec: m[3]!, typeOnly: m[1] !== undefined, line: lineAt(m.index) });
  }
  for (const m of text.matchAll(/^import\s*(['"])([^'"\n]+)\1/gm)) {
    out.push({ spec: m[2]!, typeOnly: false, line: lineAt(m.index) });
  }
  for (const m of text.matchAll(/(\btypeof\s+)?\bimport\s*\(\s*(['"])([^'"\n]+)\2\s*\)/g)) {
    out.push({ spec: m[3]!, typeOnly: m[1] !== undefined, line: lineAt(m.index) });
  }
  return out.sort((a, b) => a.line - b.line);
}

/** The folder row key of a file (src/x/ or src/main.ts). */
function folderOf(file: string): string {
  const parts = file.split('/');
  return parts.length > 2 ? `${parts[0]}/${parts[1]}/` : file;
}

/** What an import names: a file of src (its .ts), node:x, or a package's name. */
function target(from: string, spec: string): string {
  if (spec.startsWith('.')) return posix.join(posix.dirname(from), spec).replace(/\.js$/, '.ts');
  if (spec.startsWith('node:')) return spec;
  const parts = spec.split('/');
  return spec.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
}

const isModule = (t: string) => t.startsWith('src/');

/** Pure modules may import these packages and Node.js builtins, and no other. */
const PURE_PACKAGES = new Set(['prom-client']);
const PURE_BUILTINS = new Set(['node:crypto']);

interface Layers {
  rows: Row[];
  files: { file: string; text: string }[];
  edges: Edge[];
  /** Files with an index.ts in their folder: that folder's public API. */
  indexed: Set<string>;
}

/** One broken rule: `key` names the import (file -> target) and the rule, without a line number. */
interface Violation {
  key: string;
  text: string;
}

/** Every broken rule, one line each, naming the file, the line, what it imports and the rule. */
function violations(l: Layers): Violation[] {
  const byKey = new Map(l.rows.map((r) => [r.key, r]));
  const rowOf = (file: string) => byKey.get(file) ?? byKey.get(folderOf(file));
  const out: Violation[] = [];
  const broken = (e: Edge, rule: string, why: string) =>
    out.push({
      key: `${e.from} -> ${e.to}: ${rule}`,
      text: `${e.from}:${e.line} imports ${e.to}${e.typeOnly ? ' (type only)' : ''}: ${why}`,
    });
  for (const e of l.edges) {
    const from = rowOf(e.from);
    if (!from) continue; // reported as a file without a row
    if (!isModule(e.to)) {
      const allowed = e.to.startsWith('node:') ? PURE_BUILTINS : PURE_PACKAGES;
      if (from.kind === 'pure' && !allowed.has(e.to)) {
        const what = e.to.startsWith('node:') ? 'Node.js builtin' : 'package';
        broken(e, 'pure', `${from.key} is pure: no ${what} but ${[...allowed].join(', ')}`);
      }
      continue;
    }
    const to = rowOf(e.to);
    if (!to) {
      broken(e, 'ships', 'not a file that ships (a test or testing helper?)');
      continue;
    }
    if (from.kind === 'pure' && to.kind === 'edge') {
      broken(e, 'pure', `${from.key} is pure, ${to.key} is an I/O edge`);
    }
    if (from.kind === 'shared' && to.kind !== 'shared') {
      broken(e, 'shared', `${from.key} is shared: it imports only shared modules`);
    }
    const sameFolder = folderOf(e.from) === folderOf(e.to);
    if (sameFolder) continue;
    const listed = from.mayImport.includes(to.key) || from.mayImport.includes(folderOf(e.to));
    if (to.kind !== 'shared' && !listed) {
      broken(e, 'listed', `not in what ${from.key} may import (${from.mayImport.join(' ') || 'nothing'})`);
    }
    const index = `${folderOf(e.to)}index.ts`;
    if (l.indexed.has(index) && e.to !== index) {
      broken(e, 'index', `${folderOf(e.to)} is imported through its index.ts (its public API)`);
    }
  }
  for (const f of l.files) {
    const row = rowOf(f.file);
    const text = (why: string) => ({ key: `${f.file}: ${why}`, text: `${f.file}: ${why}` });
    if (!row) out.push(text('no row in the Layers table of docs/architecture.md'));
    else if (row.kind === 'pure' && /(?<![\w$.])process\s*\./.test(codeOnly(f.text))) {
      out.push(
        text(`${row.key} is pure: it does not touch the process global (environment, streams, signals)`),
      );
    }
  }
  return [...out, ...cycles(l.edges).map((c) => ({ key: c.split(':')[0]!, text: c }))];
}

const textsOf = (l: Layers) => violations(l).map((v) => v.text);

/** Each cycle between folders (type-only imports count), with the imports that close it. */
function cycles(edges: Edge[]): string[] {
  const graph = new Map<string, Map<string, Edge>>();
  for (const e of edges) {
    if (!isModule(e.to) || folderOf(e.from) === folderOf(e.to)) continue;
    const from = folderOf(e.from);
    if (!graph.has(from)) graph.set(from, new Map());
    if (!graph.get(from)!.has(folderOf(e.to))) graph.get(from)!.set(folderOf(e.to), e);
  }
  // Tarjan's strongly connected components: each component of more than one folder is a cycle.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const out: string[] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    for (const w of graph.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (stack.includes(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    for (let w = stack.pop(); w !== undefined; w = w === v ? undefined : stack.pop()) component.push(w);
    if (component.length < 2) return;
    const members = new Set(component);
    const closing = [...members].flatMap((a) =>
      [...(graph.get(a) ?? [])]
        .filter(([b]) => members.has(b))
        .map(([, e]) => `${e.from}:${e.line} -> ${e.to}`),
    );
    out.push(`cycle between ${[...members].sort().join(', ')}: ${closing.sort().join('; ')}`);
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return out;
}

/** What esbuild loads at run time from each file: src files, builtins and packages. */
async function runtimeImports(files: string[]): Promise<Map<string, Set<string>>> {
  const result = await build({
    absWorkingDir: REPO,
    entryPoints: files,
    bundle: true,
    write: false,
    metafile: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    packages: 'external',
    outdir: 'layers-test-out',
    logLevel: 'silent',
  });
  const out = new Map<string, Set<string>>();
  for (const [file, input] of Object.entries(result.metafile.inputs)) {
    out.set(
      file,
      new Set(input.imports.map((i) => (i.external ? target(file, i.path) : i.path.replace(/\\/g, '/')))),
    );
  }
  return out;
}

const SHIPPED = walkFiles(join(REPO, 'src'), (p) => p.endsWith('.ts'))
  .map((p) => relative(REPO, p).split('\\').join('/'))
  .filter((f) => !f.endsWith('.test.ts') && !f.endsWith('/testing.ts') && !f.includes('/testing/'))
  .sort();

function load(): Layers {
  const files = SHIPPED.map((file) => ({ file, text: readFileSync(join(REPO, file), 'utf8') }));
  const edges = files.flatMap(({ file, text }) =>
    importsOf(text).map((i) => ({ ...i, from: file, to: target(file, i.spec) })),
  );
  return {
    rows: layerTable(ARCHITECTURE),
    files,
    edges,
    indexed: new Set(SHIPPED.filter((f) => f.endsWith('/index.ts'))),
  };
}

/**
 * Imports that broke a rule when the rules were written down (issue 40) and are still there. Each
 * is tolerated until it goes; one that is gone must leave this list too, so that it only shrinks.
 * Empty since 2026-12-05 (the last ten, past the indexes of src/election and src/watch, went).
 */
const KNOWN: readonly string[] = [];

describe('layers (docs/architecture.md "Layers")', () => {
  const layers = load();

  it('the scanner is real: statements over several lines, type-only ones, import(), and not comments, strings or templates', () => {
    const src = [
      "import { a, type B } from './a.js';",
      'import type {',
      '  C,',
      "} from '../c/c.js';",
      "export { d } from './d.js';",
      "export type * from './e.js';",
      "import './side-effect.js';",
      "// import { x } from './commented.js';",
      "/* export { y } from './block.js'; */",
      'const t = `',
      "import { z } from './template.js';",
      '`;',
      'const s = "from \'./string.js\'";',
      "const r = /import '.\\/regex.js'/;",
      "const m = await import('./dynamic.js');",
      "type M = typeof import('./type-query.js');",
    ].join('\n');
    expect(importsOf(src)).toEqual([
      { spec: './a.js', typeOnly: false, line: 1 },
      { spec: '../c/c.js', typeOnly: true, line: 2 },
      { spec: './d.js', typeOnly: false, line: 5 },
      { spec: './e.js', typeOnly: true, line: 6 },
      { spec: './side-effect.js', typeOnly: false, line: 7 },
      { spec: './dynamic.js', typeOnly: false, line: 15 },
      { spec: './type-query.js', typeOnly: true, line: 16 },
    ]);
    expect(layers.files.length).toBeGreaterThan(80);
    expect(layers.edges.filter((e) => isModule(e.to)).length).toBeGreaterThan(300);
  });

  it('the scanner finds exactly the imports esbuild loads at run time, file by file, besides the type-only ones', async () => {
    const runtime = await runtimeImports(SHIPPED);
    const differences: string[] = [];
    for (const file of SHIPPED) {
      const scanned = new Set(layers.edges.filter((e) => e.from === file && !e.typeOnly).map((e) => e.to));
      const loaded = runtime.get(file) ?? new Set<string>();
      for (const t of loaded)
        if (!scanned.has(t)) differences.push(`${file}: esbuild loads ${t}, the scanner missed it`);
      for (const t of scanned)
        if (!loaded.has(t)) differences.push(`${file}: the scanner found ${t}, esbuild does not load it`);
    }
    expect(differences).toEqual([]);
  });

  it('the table names every module once, each row an existing file or folder, and lists only rows', () => {
    const keys = layers.rows.map((r) => r.key);
    expect(keys.length).toBeGreaterThanOrEqual(15);
    expect(keys.filter((k, i) => keys.indexOf(k) !== i)).toEqual([]);
    expect(keys.filter((k) => !existsSync(join(REPO, k)))).toEqual([]);
    const problems = layers.rows.flatMap((r) =>
      r.mayImport.filter((m) => !keys.includes(m)).map((m) => `${r.key} may import ${m}, which has no row`),
    );
    // A pure row lists only pure rows: what it may import is pure by the table itself.
    const kindOf = new Map(layers.rows.map((r) => [r.key, r.kind]));
    for (const r of layers.rows.filter((r) => r.kind !== 'edge')) {
      for (const m of r.mayImport.filter((m) => kindOf.get(m) === 'edge')) {
        problems.push(`${r.key} is ${r.kind} but lists ${m}, an I/O edge`);
      }
    }
    expect(problems).toEqual([]);
    // Every folder of src/ has a row of its own.
    const folders = [...new Set(SHIPPED.map(folderOf))];
    expect(folders.filter((f) => !keys.includes(f))).toEqual([]);
  });

  it('every import keeps the rules: pure cores import no I/O, only listed folders, through their index, no cycles', () => {
    const found = violations(layers);
    expect(found.filter((v) => !KNOWN.includes(v.key)).map((v) => v.text)).toEqual([]);
    // The list of known exceptions only shrinks: one that is gone must leave it.
    expect(KNOWN.filter((k) => !found.some((v) => v.key === k))).toEqual([]);
  });

  it('the rules are real: a forbidden import, a cycle and a deep import are each named', () => {
    const rows: Row[] = [
      { key: 'src/core/', kind: 'pure', mayImport: ['src/util/'] },
      { key: 'src/util/', kind: 'pure', mayImport: [] },
      { key: 'src/io/', kind: 'edge', mayImport: ['src/core/', 'src/util/'] },
      { key: 'src/io/types.ts', kind: 'pure', mayImport: [] },
      { key: 'src/log/', kind: 'shared', mayImport: [] },
    ];
    const edge = (from: string, spec: string, typeOnly = false): Edge => ({
      from,
      spec,
      typeOnly,
      line: 1,
      to: target(from, spec),
    });
    const files = ['src/core/a.ts', 'src/core/index.ts', 'src/util/u.ts', 'src/io/w.ts', 'src/io/types.ts'];
    const check = (edges: Edge[]) =>
      textsOf({
        rows,
        files: files.map((file) => ({ file, text: '' })),
        edges,
        indexed: new Set(['src/core/index.ts']),
      });
    // Allowed: an edge imports a core through its index and a file of its own folder; a core a
    // shared module, node:crypto and prom-client; a core may import a pure file of an I/O folder
    // (a row of its own), when its row lists it.
    expect(
      check([
        edge('src/io/w.ts', '../core/index.js'),
        edge('src/io/w.ts', './types.js'),
        edge('src/core/a.ts', '../log/l.js'),
        edge('src/core/a.ts', 'node:crypto'),
        edge('src/core/a.ts', 'prom-client'),
      ]),
    ).toEqual([]);
    expect(check([edge('src/core/a.ts', '../io/types.js', true)])).toEqual([
      'src/core/a.ts:1 imports src/io/types.ts (type only): not in what src/core/ may import (src/util/)',
    ]);
    expect(check([edge('src/core/a.ts', '../io/w.js')])).toEqual([
      'src/core/a.ts:1 imports src/io/w.ts: src/core/ is pure, src/io/ is an I/O edge',
      'src/core/a.ts:1 imports src/io/w.ts: not in what src/core/ may import (src/util/)',
    ]);
    expect(check([edge('src/core/a.ts', 'node:fs')])).toEqual([
      'src/core/a.ts:1 imports node:fs: src/core/ is pure: no Node.js builtin but node:crypto',
    ]);
    expect(check([edge('src/io/w.ts', '../core/a.js')])).toEqual([
      'src/io/w.ts:1 imports src/core/a.ts: src/core/ is imported through its index.ts (its public API)',
    ]);
    expect(
      check([edge('src/util/u.ts', '../core/index.js', true), edge('src/core/a.ts', '../util/u.js')]),
    ).toEqual([
      'src/util/u.ts:1 imports src/core/index.ts (type only): not in what src/util/ may import (nothing)',
      'cycle between src/core/, src/util/: src/core/a.ts:1 -> src/util/u.ts; src/util/u.ts:1 -> src/core/index.ts',
    ]);
    expect(
      textsOf({
        rows,
        files: [{ file: 'src/core/a.ts', text: 'const e = process.env.X;' }],
        edges: [],
        indexed: new Set(),
      }),
    ).toEqual([
      'src/core/a.ts: src/core/ is pure: it does not touch the process global (environment, streams, signals)',
    ]);
  });
});
