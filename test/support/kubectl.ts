import { existsSync } from 'node:fs';
import { binariesIn } from '../../src/localcluster/binaries.js';

/**
 * The project's own kubectl (`scripts/build-control-plane.sh --with-kubectl`, which `./dev test`
 * runs before the tests; test/kind/offline/provision.sh builds it too), never whatever kubectl the
 * machine has on PATH. Missing, it throws saying how to build it: the tests that need it fail, they
 * do not skip.
 */
export function projectKubectl(): string {
  const kubectl = binariesIn().kubectl;
  if (!existsSync(kubectl)) {
    throw new Error(
      `the project's kubectl is not built (${kubectl}); run: bash scripts/build-control-plane.sh --with-kubectl`,
    );
  }
  return kubectl;
}
