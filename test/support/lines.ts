import { StringDecoder } from 'node:string_decoder';

/**
 * Splits a byte stream into lines as they complete: a line (or a UTF-8 character) cut across two
 * chunks is joined before `onLine` sees it, so a JSON log line is never parsed in halves. `end()`
 * hands over a last line that has no newline.
 */
export function lineReader(onLine: (line: string) => void): { push(chunk: Buffer): void; end(): void } {
  const decoder = new StringDecoder('utf8');
  let rest = '';
  const emit = (text: string) => {
    const parts = (rest + text).split('\n');
    rest = parts.pop() ?? '';
    for (const line of parts) onLine(line);
  };
  return {
    push: (chunk) => emit(decoder.write(chunk)),
    end: () => {
      emit(decoder.end());
      if (rest !== '') onLine(rest);
      rest = '';
    },
  };
}
