import { defineConfig } from 'vitest/config';

// The unit tests Stryker runs against its mutants (stryker.config.json): those of the cores it
// mutates. Not the main vitest.config.ts, whose e2e and kind projects build dist/ and start
// control planes.
export default defineConfig({
  test: {
    include: [
      'src/disruption/**/*.test.ts',
      'src/clock/token-bucket.test.ts',
      'src/config/pool-file*.test.ts',
      'src/health/**/*.test.ts',
      'src/election/**/*.test.ts',
      'src/controller/**/*.test.ts',
      'src/remediation/**/*.test.ts',
      'src/second-opinion/**/*.test.ts',
    ],
    environment: 'node',
    testTimeout: 20_000,
  },
});
