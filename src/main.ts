#!/usr/bin/env node
import os from 'node:os';
import { buildInfo, nodeVersionWarning, versionLine } from './cli/build-info.js';
import { runController } from './cli/run.js';
import { type Config, FlagError, helpText, loadConfig } from './config/index.js';
import { KubeconfigError } from './kube/kubeconfig.js';
import { proxyEnvOf } from './kube/proxy.js';
import { createLogger } from './log/logger.js';
import { guardUnhandledRxjsErrors } from './watch/index.js';

const USAGE = `node-lifecycle-controller: marks Kubernetes nodes whose heartbeat leases stop being renewed.

Usage:
  node-lifecycle-controller [flags]            run the controller
  node-lifecycle-controller status [--watch]   live view of node heartbeats, states, taints and the leader
  node-lifecycle-controller cleanup [--yes]    after an uninstall: take off the nodes what only it would (dry run without --yes)
  node-lifecycle-controller demo               local control plane + simulated fleet + the controller`;

async function main(argv: string[]): Promise<void> {
  const tooOld = nodeVersionWarning(process.version);
  if (tooOld) console.error(tooOld);
  const sub = argv[0];
  if (sub === 'status') return await status(argv.slice(1));
  if (sub === 'demo') return await demo(argv.slice(1));
  if (sub === 'cleanup') return await cleanup(argv.slice(1));
  let loaded: ReturnType<typeof loadConfig>;
  try {
    loaded = loadConfig(
      argv,
      { POD_NAME: process.env.POD_NAME, POD_NAMESPACE: process.env.POD_NAMESPACE },
      os.hostname(),
    );
  } catch (err) {
    if (err instanceof FlagError) {
      console.error(`error: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  if (loaded.args.help) {
    process.stdout.write(`${helpText(USAGE)}\n`);
    return;
  }
  if (loaded.args.version) {
    process.stdout.write(`${versionLine(buildInfo())}\n`);
    return;
  }
  if (loaded.args.positionals.length > 0) {
    console.error(`error: unexpected argument ${JSON.stringify(loaded.args.positionals[0])} (see --help)`);
    process.exit(2);
  }
  await run(loaded.config);
}

/** `status`: a command-line tool; an error is one line, no stack (e.g. a failing exec plugin). */
async function status(argv: string[]): Promise<void> {
  const { runStatus } = await import('./cli/status.js');
  try {
    process.exitCode = await runStatus(argv, process.env);
  } catch (err) {
    console.error(`error: ${(err instanceof Error ? err.message : String(err)).split('\n')[0]}`);
    process.exitCode = 1;
  }
}

/** `cleanup`: a command-line tool, as `status`: an error is one line, no stack. */
async function cleanup(argv: string[]): Promise<void> {
  const { runCleanup } = await import('./cli/cleanup.js');
  try {
    process.exitCode = await runCleanup(argv, process.env);
  } catch (err) {
    console.error(`error: ${(err instanceof Error ? err.message : String(err)).split('\n')[0]}`);
    process.exitCode = 1;
  }
}

/** `demo`: left out of the container image (it needs the repository and Go-built binaries). */
async function demo(argv: string[]): Promise<void> {
  const module = await import('./cli/demo.js').catch((err: unknown) => {
    if ((err as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    return undefined;
  });
  if (!module) {
    console.error('error: the demo is not part of this build; run it from the repository: ./dev demo');
    process.exitCode = 2;
    return;
  }
  process.exitCode = await module.runDemo(argv, process.env);
}

/** The controller itself, with the process's environment, signals and exit. */
async function run(config: Config): Promise<void> {
  const logger = createLogger({ format: config.log.format, verbosity: config.log.verbosity });
  // A promise rejection or exception nobody handles means this process is in a state we did not
  // plan for: log it and exit non-zero, so that Kubernetes restarts it clean and another replica
  // can take over (the leader lease is not released: it runs out, as for a crash).
  const fatal = (msg: string) => (err: unknown) => {
    logger.error(msg, { err, stack: err instanceof Error ? err.stack : undefined });
    process.exit(1);
  };
  process.on('unhandledRejection', fatal('Unhandled promise rejection: exiting'));
  process.on('uncaughtException', fatal('Uncaught exception: exiting'));
  // Nothing a consumer of a stream throws may take the process down: count and log it instead.
  guardUnhandledRxjsErrors((err) => logger.error('Unhandled error in a stream consumer', { err }));
  try {
    await runController({
      config,
      logger,
      env: {
        KUBECONFIG: process.env.KUBECONFIG,
        KUBERNETES_SERVICE_HOST: process.env.KUBERNETES_SERVICE_HOST,
        KUBERNETES_SERVICE_PORT: process.env.KUBERNETES_SERVICE_PORT,
      },
      processEnv: process.env,
      proxyEnv: proxyEnvOf(process.env),
      build: buildInfo(),
      exit: (code) => process.exit(code),
      signals: process,
    });
  } catch (err) {
    if (err instanceof KubeconfigError) {
      logger.error('No usable kubeconfig or proxy settings', { err: err.message });
      process.exit(2);
    }
    if (err instanceof FlagError) {
      // A flag whose value is only checked at start-up (the --node-pool-config file).
      logger.error('Invalid flag', { err: err.message });
      process.exit(2);
    }
    logger.error('Failed to start', { err });
    process.exit(1);
  }
}

await main(process.argv.slice(2));
