/**
 * Long options of the bench commands (bench/compare/run.ts, bench/fair-set.ts): `--name=value`,
 * `--name value`, `--name` alone (true) and `--no-name` (false). Names in `raw` take the next
 * argument as their value even when it starts with `--` (their values are flags themselves).
 * Anything else, or a name not in `known`, is an error.
 */
export function parseLongOptions(
  argv: readonly string[],
  known: readonly string[],
  raw: readonly string[] = [],
): Map<string, string> {
  const m = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const eq = a.indexOf('=');
    const next = argv[i + 1];
    if (eq > 0) m.set(a.slice(2, eq), a.slice(eq + 1));
    else if (raw.includes(a.slice(2)) && next !== undefined) m.set(a.slice(2), argv[++i]!);
    else if (a.startsWith('--no-')) m.set(a.slice(5), 'false');
    else if (next !== undefined && !next.startsWith('--')) m.set(a.slice(2), argv[++i]!);
    else m.set(a.slice(2), 'true');
  }
  for (const k of m.keys()) if (!known.includes(k)) throw new Error(`unknown option --${k}`);
  return m;
}
