/**
 * Splits a watch response body into its lines. The body arrives as text chunks split anywhere; a
 * line (one JSON watch event) ends with '\n' and may span chunks, so the unterminated rest of a
 * chunk waits for the chunk that ends it. Empty lines are skipped.
 *
 * Pull-style (`push` a chunk, then `next` until undefined) so that the caller can stop between
 * two lines, when handling one abandoned the request, without the decoder knowing why; it then
 * calls `reset` (the lines not taken are dropped with the stream).
 */
export class LineDecoder {
  private readonly maxLineLength: number;
  /** The start of a line whose end has not arrived yet. */
  private partial = '';
  /** The chunk being read, where its next line starts and where that line ends (-1: no more). */
  private chunk = '';
  private start = 0;
  private nl = -1;

  constructor(maxLineLength: number) {
    this.maxLineLength = maxLineLength;
  }

  /** Takes the next chunk; true when it ends at least one line (read them with `next`). */
  push(chunk: string): boolean {
    const nl = chunk.indexOf('\n');
    if (nl === -1) {
      this.partial = this.partial.length === 0 ? chunk : this.partial + chunk;
      return false;
    }
    this.chunk = chunk;
    this.start = 0;
    this.nl = nl;
    return true;
  }

  /** The next complete line of the chunk pushed last, or undefined when it has no more. */
  next(): string | undefined {
    const chunk = this.chunk;
    while (this.nl !== -1) {
      const start = this.start;
      const nl = this.nl;
      this.start = nl + 1;
      this.nl = chunk.indexOf('\n', nl + 1);
      if (this.partial.length > 0) {
        const line = this.partial + chunk.slice(start, nl);
        this.partial = '';
        return line;
      }
      if (nl > start) return chunk.slice(start, nl);
    }
    if (this.start < chunk.length) this.partial = chunk.slice(this.start);
    this.chunk = '';
    this.start = 0;
    return undefined;
  }

  /**
   * The unterminated line held is longer than the limit (a line is only checked while it waits
   * for its end, as a bound on what is held).
   */
  overLimit(): boolean {
    return this.partial.length > this.maxLineLength;
  }

  /** At the end of the body: its last line if it has no '\n', and nothing is held any more. */
  takeRest(): string | undefined {
    const rest = this.partial;
    if (rest.length === 0) return undefined;
    this.partial = '';
    return rest;
  }

  /** Forgets everything held: the next chunk starts a new body. */
  reset(): void {
    this.partial = '';
    this.chunk = '';
    this.start = 0;
    this.nl = -1;
  }
}
