// Types of scripts/function-lengths.mjs for the tests that import it.
export interface FunctionLength {
  /** As given (relative to cwd). */
  file: string;
  name: string;
  /** 1-based line of the function's first token. */
  line: number;
  lines: number;
}
export function functionLengths(files: readonly string[], cwd?: string): FunctionLength[];
export function projectFiles(args: readonly string[], cwd?: string): string[];
export interface ClassFields {
  /** As given (relative to cwd). */
  file: string;
  name: string;
  /** 1-based line of the class's first token. */
  line: number;
  /** Property declarations and constructor parameter properties. */
  fields: number;
}
export function classFields(files: readonly string[], cwd?: string): ClassFields[];
