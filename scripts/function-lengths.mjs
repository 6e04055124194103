#!/usr/bin/env node
// Lines per function, from the TypeScript compiler's own syntax tree (typescript/unstable/sync: the
// compiler runs as a child process and answers for the project's tsconfig.json).
//
//   node scripts/function-lengths.mjs src/cli/run.ts        every function of the file, longest first
//   node scripts/function-lengths.mjs --over=80 src         those of more than 80 lines under src/
//   node scripts/function-lengths.mjs --fields --over=15 src  classes with more than 15 fields
//
// A function counts from the line of its first token (after its comments) to the line of its
// closing brace; a function inside another counts in both. Every function-like node counts:
// declarations, methods, constructors, accessors, arrow functions and function expressions (named
// after the variable, property or class member they are assigned to, else `<anonymous>`).
import path from 'node:path';
import { SyntaxKind } from 'typescript/unstable/ast';
import { API } from 'typescript/unstable/sync';
import { runAsScript } from './run-as-script.mjs';

const FUNCTION_KINDS = new Set([
  SyntaxKind.FunctionDeclaration,
  SyntaxKind.MethodDeclaration,
  SyntaxKind.Constructor,
  SyntaxKind.GetAccessor,
  SyntaxKind.SetAccessor,
  SyntaxKind.ArrowFunction,
  SyntaxKind.FunctionExpression,
]);

const NAMED_BY_PARENT = new Set([
  SyntaxKind.VariableDeclaration,
  SyntaxKind.PropertyAssignment,
  SyntaxKind.PropertyDeclaration,
]);

function nameOf(node, sf) {
  if (node.kind === SyntaxKind.Constructor) return 'constructor';
  if (node.name) return sf.text.slice(node.name.getStart(sf), node.name.end);
  const parent = node.parent;
  if (parent && NAMED_BY_PARENT.has(parent.kind) && parent.name) {
    return sf.text.slice(parent.name.getStart(sf), parent.name.end);
  }
  return '<anonymous>';
}

/** The functions of one parsed source file: { name, line (1-based), lines }. */
function functionsOf(sf) {
  const out = [];
  const visit = (node) => {
    if (FUNCTION_KINDS.has(node.kind)) {
      const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const end = sf.getLineAndCharacterOfPosition(node.end).line;
      out.push({ name: nameOf(node, sf), line: start + 1, lines: end - start + 1 });
    }
    node.forEachChild(visit);
  };
  sf.forEachChild(visit);
  return out;
}

/**
 * The classes of one parsed source file: { name, line, fields }. A field is a property declaration
 * (static or not, initialised or not) or a constructor parameter property (`readonly x`); accessors
 * and methods are not fields.
 */
function classesOf(sf) {
  const out = [];
  const visit = (node) => {
    if (node.kind === SyntaxKind.ClassDeclaration || node.kind === SyntaxKind.ClassExpression) {
      let fields = 0;
      for (const member of node.members) {
        if (member.kind === SyntaxKind.PropertyDeclaration) fields++;
        if (member.kind === SyntaxKind.Constructor) {
          fields += member.parameters.filter((p) => (p.modifiers?.length ?? 0) > 0).length;
        }
      }
      const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
      out.push({
        name: node.name ? sf.text.slice(node.name.getStart(sf), node.name.end) : '<anonymous>',
        line,
        fields,
      });
    }
    node.forEachChild(visit);
  };
  sf.forEachChild(visit);
  return out;
}

function eachSourceFile(files, cwd, fn) {
  const api = new API({ cwd });
  try {
    const project = api.updateSnapshot({ openProject: path.join(cwd, 'tsconfig.json') }).getProjects()[0];
    for (const file of files) {
      const sf = project.program.getSourceFile(path.resolve(cwd, file));
      if (!sf) throw new Error(`${file}: not a file of ${path.join(cwd, 'tsconfig.json')}`);
      fn(file, sf);
    }
  } finally {
    api.close();
  }
}

/** Every class of the given files (paths relative to `cwd`) with its field count, most fields first. */
export function classFields(files, cwd = process.cwd()) {
  const out = [];
  eachSourceFile(files, cwd, (file, sf) => {
    for (const c of classesOf(sf)) out.push({ file, ...c });
  });
  return out.sort((a, b) => b.fields - a.fields || a.file.localeCompare(b.file) || a.line - b.line);
}

/**
 * Every function of the given files (paths relative to `cwd`), with its file, from the project of
 * `cwd`/tsconfig.json. Longest first.
 */
export function functionLengths(files, cwd = process.cwd()) {
  const out = [];
  eachSourceFile(files, cwd, (file, sf) => {
    for (const f of functionsOf(sf)) out.push({ file, ...f });
  });
  return out.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line);
}

/** The .ts files (tests and declarations aside) named, or under the folders named, in `cwd`'s project. */
export function projectFiles(args, cwd = process.cwd()) {
  const api = new API({ cwd });
  try {
    const project = api.updateSnapshot({ openProject: path.join(cwd, 'tsconfig.json') }).getProjects()[0];
    const all = project.program
      .getSourceFileNames()
      .map((f) => path.relative(cwd, f))
      .filter((f) => !f.startsWith('..') && !f.includes('node_modules') && !f.endsWith('.d.ts'));
    return all.filter((f) =>
      args.some((a) => {
        const p = path.normalize(a).replace(/\/$/, '');
        return f === p || (f.startsWith(`${p}/`) && !f.endsWith('.test.ts'));
      }),
    );
  } finally {
    api.close();
  }
}

function main(argv) {
  const over = Number(argv.find((a) => a.startsWith('--over='))?.slice('--over='.length) ?? 0);
  const args = argv.filter((a) => !a.startsWith('--'));
  if (args.length === 0)
    throw new Error('usage: function-lengths.mjs [--fields] [--over=N] <file or folder>...');
  if (argv.includes('--fields')) {
    const rows = classFields(projectFiles(args)).filter((c) => c.fields > over);
    for (const c of rows) console.log(`${String(c.fields).padStart(5)}  ${c.file}:${c.line}  ${c.name}`);
    return;
  }
  const rows = functionLengths(projectFiles(args)).filter((f) => f.lines > over);
  for (const f of rows) console.log(`${String(f.lines).padStart(5)}  ${f.file}:${f.line}  ${f.name}`);
}

runAsScript(import.meta.url, main);
