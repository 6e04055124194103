// Preloaded into the built controller by an e2e test (NODE_OPTIONS=--import=<this file>): on
// SIGUSR2 it makes the process have an unhandled promise rejection, or with
// NLC_TEST_FAULT=exception an uncaught exception. Nothing of it is in dist/.
process.on('SIGUSR2', () => {
  if (process.env.NLC_TEST_FAULT === 'exception') {
    setImmediate(() => {
      throw new Error('injected uncaught exception');
    });
  } else {
    void Promise.reject(new Error('injected unhandled rejection'));
  }
});
