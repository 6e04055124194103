import { describe, expect, it } from 'vitest';
import { LineDecoder } from './line-decoder.js';

/** Pushes `chunks` one by one and takes every line; `ended` says which chunks ended a line. */
function decode(d: LineDecoder, chunks: string[]): { lines: string[]; ended: boolean[] } {
  const lines: string[] = [];
  const ended: boolean[] = [];
  for (const chunk of chunks) {
    ended.push(d.push(chunk));
    for (let line = d.next(); line !== undefined; line = d.next()) lines.push(line);
  }
  return { lines, ended };
}

describe('LineDecoder', () => {
  it('gives the lines of a chunk in order', () => {
    const d = new LineDecoder(100);
    expect(decode(d, ['a\nbb\nccc\n'])).toEqual({ lines: ['a', 'bb', 'ccc'], ended: [true] });
    expect(d.takeRest()).toBeUndefined();
  });

  it('joins a line split across chunks, however it is split', () => {
    const d = new LineDecoder(100);
    expect(decode(d, ['{"a"', ':1', '}\n{"b":', '2}\n{'])).toEqual({
      lines: ['{"a":1}', '{"b":2}'],
      ended: [false, false, true, true],
    });
    expect(decode(d, ['"c":3}\n']).lines).toEqual(['{"c":3}']);
  });

  it('a chunk that is only the end of a line ends it', () => {
    const d = new LineDecoder(100);
    expect(decode(d, ['abc', '\n', 'de', '\nf\n'])).toEqual({
      lines: ['abc', 'de', 'f'],
      ended: [false, true, false, true],
    });
  });

  it('skips empty lines, yet a chunk of only newlines still ends a line', () => {
    const d = new LineDecoder(100);
    expect(decode(d, ['\n\na\n\n\nb\n', '\n'])).toEqual({ lines: ['a', 'b'], ended: [true, true] });
  });

  it('keeps the unterminated rest of a chunk for the next one', () => {
    const d = new LineDecoder(100);
    expect(decode(d, ['a\nb']).lines).toEqual(['a']);
    expect(decode(d, ['c\n']).lines).toEqual(['bc']);
  });

  it('gives the unterminated last line at the end of the body, once', () => {
    const d = new LineDecoder(100);
    expect(decode(d, ['a\n', 'b', 'c']).lines).toEqual(['a']);
    expect(d.takeRest()).toBe('bc');
    expect(d.takeRest()).toBeUndefined();
  });

  it('the caller may stop between two lines; reset drops the rest of the body', () => {
    const d = new LineDecoder(100);
    expect(d.push('x')).toBe(false);
    expect(d.push('1\nx2\nx3')).toBe(true);
    expect(d.next()).toBe('x1');
    d.reset();
    expect(d.next()).toBeUndefined();
    expect(d.takeRest()).toBeUndefined();
    expect(decode(d, ['y1\n']).lines).toEqual(['y1']);
  });

  it('reset also drops an unterminated line held', () => {
    const d = new LineDecoder(100);
    expect(decode(d, ['a\nold']).lines).toEqual(['a']);
    d.reset();
    expect(d.takeRest()).toBeUndefined();
    expect(decode(d, ['new\n']).lines).toEqual(['new']);
  });

  it('is over the limit when the line it holds is longer than the limit', () => {
    const d = new LineDecoder(4);
    d.push('abcd');
    expect(d.overLimit()).toBe(false);
    d.push('e');
    expect(d.overLimit()).toBe(true);

    const e = new LineDecoder(4);
    expect(decode(e, ['a\nbcde']).lines).toEqual(['a']);
    expect(e.overLimit()).toBe(false);
    expect(decode(e, ['f\nabcdef']).lines).toEqual(['bcdef']);
    expect(e.overLimit()).toBe(true);
  });
});
