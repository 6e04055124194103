// Types of scripts/run-as-script.mjs.
export function runAsScript(moduleUrl: string, main: (argv: string[]) => void): void;
