/**
 * scripts/function-lengths.mjs: lines per function from the TypeScript compiler's syntax tree (the
 * figures of issue 40: "no function in src/ over ~80 lines").
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classFields, functionLengths, projectFiles } from '../../scripts/function-lengths.mjs';

const CLASSES = `export class Wide {
  static shared = 1;
  private a = 0;
  readonly b: string;
  c?: number;
  constructor(private readonly d: number, e: number) {
    this.b = String(d + e);
  }
  get f(): number {
    return this.a;
  }
}
export const Anon = class {
  x = 1;
};
`;

const FIXTURE = `// a comment before: not counted
export function outer(a: number): number {
  const inner = (b: number) => {
    return b + 1;
  };
  return inner(a);
}

export class K {
  constructor(readonly x: number) {}
  /** doc */
  method(): number {
    return this.x;
  }
  get twice(): number {
    return this.x * 2;
  }
}

export const handlers = {
  onEvent: function () {
    return 1;
  },
};
[1].map((v) => v + 1);
`;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'nlc-fnlen-'));
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { strict: true, types: [], noEmit: true }, include: ['src'] }),
  );
  mkdirSync(join(dir, 'src'));
  writeFileSync(join(dir, 'src', 'fixture.ts'), FIXTURE);
  writeFileSync(join(dir, 'src', 'fixture.test.ts'), 'export const t = () => 1;\n');
  writeFileSync(join(dir, 'src', 'classes.ts'), CLASSES);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('function-lengths', () => {
  it('counts every function-like node from its first token to its closing brace, longest first, named after what holds it', () => {
    const rows = functionLengths(['src/fixture.ts'], dir).map((f) => [f.name, f.line, f.lines]);
    expect(rows).toEqual([
      ['outer', 2, 6],
      ['inner', 3, 3],
      ['method', 12, 3],
      ['twice', 15, 3],
      ['onEvent', 21, 3],
      ['constructor', 10, 1],
      ['<anonymous>', 25, 1],
    ]);
  });

  it('counts the fields of each class: property declarations and constructor parameter properties, not accessors or methods', () => {
    expect(
      classFields(['src/classes.ts', 'src/fixture.ts'], dir).map((c) => [c.file, c.name, c.line, c.fields]),
    ).toEqual([
      ['src/classes.ts', 'Wide', 1, 5],
      ['src/classes.ts', '<anonymous>', 13, 1],
      ['src/fixture.ts', 'K', 9, 1],
    ]);
  });

  it('a folder names its .ts files, tests aside; a file outside the project is an error', () => {
    expect(projectFiles(['src/'], dir)).toEqual(['src/classes.ts', 'src/fixture.ts']);
    expect(projectFiles(['src/fixture.test.ts'], dir)).toEqual(['src/fixture.test.ts']);
    expect(() => functionLengths(['src/absent.ts'], dir)).toThrow(/src\/absent\.ts: not a file of/);
  });
});
