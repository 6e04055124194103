import { describe, expect, it } from 'vitest';
import { lineReader } from '../support/lines.js';

describe('lineReader', () => {
  it('joins a JSON line and a UTF-8 character cut across chunks, and flushes the last line at the end', () => {
    const lines: string[] = [];
    const r = lineReader((l) => lines.push(l));
    const text = '{"msg":"Marked node Unknown","node":"n-1"}\n{"msg":"zone é"}\npartial';
    const bytes = Buffer.from(text, 'utf8');
    const cutInE = bytes.indexOf(Buffer.from('é', 'utf8')) + 1; // inside the two-byte é
    for (const [a, b] of [
      [0, 17],
      [17, cutInE],
      [cutInE, bytes.length],
    ] as const)
      r.push(bytes.subarray(a, b));
    expect(lines).toEqual(['{"msg":"Marked node Unknown","node":"n-1"}', '{"msg":"zone é"}']);
    r.end();
    expect(lines.at(-1)).toBe('partial');
    expect(lines.map((l) => (l.startsWith('{') ? JSON.parse(l).msg : l))).toEqual([
      'Marked node Unknown',
      'zone é',
      'partial',
    ]);
  });
});
