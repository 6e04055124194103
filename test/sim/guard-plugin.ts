/**
 * The sim-guards project's Vite plugin: rewrites the guarded source files (test/sim/guards.ts) so
 * that each guard can be removed at run time, before TypeScript is stripped. No other project
 * loads it: the budget and the unit tests run the code as it is.
 */
import { relative } from 'node:path';
import { GUARDED_FILES, rewrite } from './guards.js';

export function guardPlugin(root: string) {
  return {
    name: 'nlc-sim-guards',
    enforce: 'pre' as const,
    transform(code: string, id: string) {
      const file = relative(root, id.split('?')[0]!).split('\\').join('/');
      if (!GUARDED_FILES.has(file)) return null;
      return { code: rewrite(file, code), map: null };
    },
  };
}
