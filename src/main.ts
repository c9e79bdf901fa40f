import cluster from 'node:cluster';
import { createServer, type Server } from 'node:http';

import { openStore } from '../adapters/index.ts';
import { ConfigError, loadConfig, type Config } from '../config/index.ts';
import { misspelledSettings } from '../config/misspelled.ts';
import { createLogger, type Logger } from './shared/logger.ts';
import { KeyEncryptionError, loadKeyRing } from './keys/key_encryption.ts';
import { KeyConfigError, loadKeys, type KeyMaterial } from './keys/keys.ts';
import { watchSigningKeys } from './keys/rotation_watch.ts';
import { RevocationList } from './tokens/revocation_list.ts';
import { createService } from './http/app.ts';
import { aggregateWorkerMetrics } from './http/metrics/cluster.ts';
import { Metrics } from './http/metrics/metrics.ts';
import { instrumentStore } from './http/metrics/store.ts';
import { listen, ListenError } from './http/listen.ts';
import { serveMetrics, stopServingMetrics } from './http/metrics/listener.ts';
import { superviseWorkers } from './http/workers.ts';

/** How long SIGTERM waits for requests in flight before it closes their connections. */
const SHUTDOWN_GRACE_MS = 10_000;

/**
 * Start-up: configuration, store, keys, the service, listen; with WORKERS above 1, this process
 * prepares the store once (keys, the first-start hint) and supervises that many workers, each of
 * which serves. Stops cleanly on SIGTERM and SIGINT.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  if (cluster.isPrimary) {
    for (const { name, meant } of misspelledSettings(process.env)) {
      logger.warn(`${name} is not a setting of this service and is ignored; did you mean ${meant}?`, { variable: name, meant });
    }
  }
  if (config.cimd?.trustedHosts.length) {
    logger.warn('client metadata documents may be fetched from these hosts on private or loopback addresses (CIMD_TRUSTED_HOSTS)', { hosts: config.cimd.trustedHosts.join(' ') });
  }
  if (config.metrics?.where === 'public' && config.metrics.token === undefined && cluster.isPrimary) {
    logger.warn('metrics are served on the service\'s port to anyone who reaches it (METRICS=public without METRICS_TOKEN)');
  }
  if (config.workers > 1 && cluster.isPrimary) {
    await prepare(config, logger);
    const gather = config.metrics ? aggregateWorkerMetrics(logger) : undefined;
    // One listener for the sum of every worker's metrics: the supervisor's, started before the workers.
    if (config.metrics?.where === 'local' && gather) {
      const metricsServer = await serveMetrics(config.metrics, gather, logger);
      for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => void stopServingMetrics(metricsServer));
    }
    superviseWorkers(config.workers, logger);
    return;
  }
  await serve(config, logger, config.workers === 1);
}

/** Creates what every instance must agree on before the workers start: the keys. */
async function prepare(config: Config, logger: Logger): Promise<void> {
  // The key first: a start it refuses leaves nothing on disk.
  const keyRing = await loadKeyRing(config, logger);
  const store = openStore(config.store, { ...config.durability, warn: logger.warn });
  try {
    await loadKeys(store.settings, keyRing, config.jwksFile);
    await hintWhenEmpty(store.accounts.countUsers(), logger);
  } finally {
    await store.close();
  }
}

async function serve(config: Config, logger: Logger, alone: boolean): Promise<void> {
  // One registry a process, and the store wrapped once: a service rebuilt with new keys counts on.
  const metrics = config.metrics ? new Metrics() : undefined;
  const keyRing = await loadKeyRing(config, logger);
  // Alone, this process says what it finds on disk; as a worker, the supervisor has said it.
  const opened = openStore(config.store, { ...config.durability, warn: alone ? logger.warn : undefined });
  const store = metrics ? instrumentStore(opened, metrics) : opened;
  const keys = await loadKeys(store.settings, keyRing, config.jwksFile);
  const revocations = new RevocationList(store.revocations);
  await revocations.start();
  const serviceWith = (material: KeyMaterial) => createService({ config, store, keys: material, revocations, logger, metrics }).app.callback();
  let handle = serviceWith(keys);
  // The engine takes its keys once: a rotation swaps in a service built with the new set, and
  // requests in flight finish on the one they started on (src/keys/rotation_watch.ts).
  const keyWatch = config.jwksFile ? undefined : watchSigningKeys({
    settings: store.settings, keyRing, policy: config.keyRotation, logger, initial: keys.jwks,
    onChange: (jwks) => { handle = serviceWith({ ...keys, jwks }); },
  });

  // Alone, this process serves its own metrics listener, ready before the service answers; a worker's are the supervisor's to serve.
  const metricsServer = alone && metrics && config.metrics?.where === 'local' ? await serveMetrics(config.metrics, () => metrics.scrape(), logger) : undefined;
  const server: Server = createServer((request, response) => handle(request, response));
  await listen(server, config.port, config.host, 'PORT, HOST');
  logger.info('listening', { issuer: config.issuer, port: config.port, store: config.store.split(':')[0], pid: process.pid });
  if (alone) await hintWhenEmpty(store.accounts.countUsers(), logger);

  const stop = async (signal: string) => {
    logger.info('stopping', { signal });
    // Stop accepting, let requests in flight finish, then close what is left.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    if (metricsServer) await stopServingMetrics(metricsServer);
    const deadline = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
    await closed;
    clearTimeout(deadline);
    keyWatch?.stop();
    revocations.stop();
    await store.close();
    // A worker's channel to its supervisor would keep it alive.
    cluster.worker?.disconnect();
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

const FIRST_RUN_COMMAND = 'npm run admin -- quickstart';

/** With no users yet, says how to make the first ones: in the log, and in plain words to a person at a terminal. */
async function hintWhenEmpty(users: Promise<number>, logger: Logger): Promise<void> {
  if (await users !== 0) return;
  logger.warn('no users yet: create the first workspace, its admin and a demo client with the admin CLI', {
    command: FIRST_RUN_COMMAND,
    separately: 'npm run admin -- workspace create, then user create (npm run admin -- --help)',
  });
  if (process.stderr.isTTY) {
    process.stderr.write(`\nNo users yet. To create the first workspace, its admin and a demo client to try it with, run:\n\n    ${FIRST_RUN_COMMAND}\n\n`);
  }
}

main().catch((error: unknown) => {
  const known = error instanceof ConfigError || error instanceof KeyConfigError || error instanceof KeyEncryptionError || error instanceof ListenError || error instanceof TypeError;
  process.stderr.write(`${known ? `configuration error: ${(error as Error).message}` : (error as Error).stack ?? String(error)}\n`);
  // Exit now: what had started (the metrics listener, the store's timers) would keep a process
  // that can never serve alive, and an orchestrator could neither restart it nor route around it.
  process.exit(1);
});
