// For a script that is also imported by tests: runs main(argv) only when the file is the one node was
// started with, and turns a thrown error into its message and exit status 1.
import { pathToFileURL } from 'node:url';

export function runAsScript(moduleUrl, main) {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  try {
    main(process.argv.slice(2));
  } catch (err) {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  }
}
