import cluster from 'node:cluster';
import { rmSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';

import type Koa from 'koa';

import { openStore, type OpenStoreOptions, type Store } from '../adapters/index.ts';
import { configurationErrorLine, configurationProblem, listeningOn, loadConfig, type Config } from '../config/index.ts';
import { warnOfMisspelledSettings } from '../config/misspelled.ts';
import { mootSettings } from '../config/moot.ts';
import { createLogger, type Logger } from './shared/logger.ts';
import { STOP_SIGNALS } from './shared/stop_signals.ts';
import { loadKeyRing, type KeyRing } from './keys/key_encryption.ts';
import { loadKeys, readJwksFile, type KeyMaterial } from './keys/keys.ts';
import { watchSigningKeys } from './keys/rotation_watch.ts';
import { RevocationList } from './tokens/revocation_list.ts';
import { createService, type ServiceDependencies } from './http/app.ts';
import { isBackendOutage } from './http/errors.ts';
import { storeName } from './http/health.ts';
import { aggregateWorkerMetrics } from './http/metrics/cluster.ts';
import { Metrics } from './http/metrics/metrics.ts';
import { instrumentStore } from './http/metrics/store.ts';
import { listen } from './http/listen.ts';
import { serveMetrics, stopServingMetrics } from './http/metrics/listener.ts';
import { quickstartCommand } from './cli/quickstart_command.ts';
import { startingService, whenStoreAnswers } from './http/starting.ts';
import { leaveSupervisor, stopWorkerOnConfigurationError, superviseWorkers } from './http/workers.ts';

/** How long SIGTERM waits for requests in flight before it closes their connections. */
const SHUTDOWN_GRACE_MS = 10_000;

/**
 * Start-up: configuration, the key-encryption key, the store, the keys, the service, listen (a
 * store that does not answer yet is waited for, listening meanwhile: serve()). With WORKERS above
 * 1, this process prepares the store once (keys, the first-start hint) and supervises that many
 * workers, each of which serves. A configuration error stops it with one line and exit code 1.
 * Stops cleanly on SIGTERM, SIGINT and SIGHUP.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, { pid: config.workers > 1 });
  if (cluster.isPrimary) {
    warnOfMisspelledSettings(process.env, logger.warn);
    for (const { name, because } of mootSettings(process.env, config)) {
      logger.warn(`${name} has no effect: ${because}`, { variable: name });
    }
  }
  // Read before anything is written (the key-encryption key, the store): a JWKS_FILE that will not do stops the start.
  if (config.jwksFile && cluster.isPrimary) await readJwksFile(config.jwksFile);
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
      // Every signal, as the service's own handler takes them (serve): closing the listener again changes nothing.
      for (const signal of STOP_SIGNALS) process.on(signal, () => void stopServingMetrics(metricsServer));
    }
    superviseWorkers(config.workers, logger);
    return;
  }
  await serve(config, logger, config.workers === 1);
}

/**
 * Creates what every instance must agree on before the workers start: the keys. A store that does
 * not answer yet does not hold the workers back: each waits for it, answering the probes meanwhile.
 */
async function prepare(config: Config, logger: Logger): Promise<void> {
  // The key first: a start it refuses leaves nothing on disk.
  const keyRing = await loadKeyRing(config, logger);
  const store = openStoreSealedBy(keyRing, config.store, { ...config.durability, warn: logger.warn });
  try {
    await loadKeys(store.settings, keyRing, config.jwksFile);
    await hintWhenEmpty(store.accounts.countUsers(), config, logger);
  } catch (error) {
    if (!isBackendOutage(error)) throw error;
    logger.warn(`the ${storeName(store)} store does not answer yet; the workers start and wait for it`, { reason: (error as Error).message });
  } finally {
    await store.close();
  }
}

/**
 * Opens the store the key ring is to seal. The key is read first, so that a key refused leaves no
 * store made on disk; a store that cannot be opened (STORE a path that is no database) takes back
 * the key file this start has just made for it: it has sealed nothing, and left there it would be
 * taken for the key of the store the next start opens, as a key that was already there would be.
 */
function openStoreSealedBy(keyRing: KeyRing, url: string, options: OpenStoreOptions): Store {
  try {
    return openStore(url, options);
  } catch (error) {
    if (keyRing.createdFile) rmSync(keyRing.createdFile, { force: true });
    throw error;
  }
}

/**
 * Reads the keys and the revocation list from the store, then listens and serves. A store that
 * does not answer that first time (Redis still starting, or unreachable a while) does not stop
 * it: it listens then, answering as src/http/starting.ts says, and serves once the store answers.
 */
async function serve(configured: Config, logger: Logger, alone: boolean): Promise<void> {
  let config = configured;
  // One registry a process, and the store wrapped once: a service rebuilt with new keys counts on.
  const metrics = config.metrics ? new Metrics() : undefined;
  const keyRing = await loadKeyRing(config, logger);
  // Alone, this process says what it finds on disk; as a worker, the supervisor has said it.
  const opened = openStoreSealedBy(keyRing, config.store, { ...config.durability, warn: alone ? logger.warn : undefined });
  const store = metrics ? instrumentStore(opened, metrics) : opened;

  // Alone, this process serves its own metrics listener, ready before the service answers; a worker's are the supervisor's to serve.
  const metricsServer = alone && metrics && config.metrics?.where === 'local' ? await serveMetrics(config.metrics, () => metrics.scrape(), logger) : undefined;
  let handle: Handler = startingService({ config, store, logger, metrics }).callback();
  // Once stopping, every answer not yet begun ends its connection, so no client sends another
  // request on it: the process exits as the last request in flight is answered.
  const inFlight = new Set<ServerResponse>();
  let stopping = false;
  const server: Server = createServer((request, response) => {
    if (stopping) response.setHeader('Connection', 'close');
    inFlight.add(response);
    response.once('close', () => inFlight.delete(response));
    handle(request, response);
  });
  const waiting = new AbortController();
  const listening = async () => {
    if (server.listening) return;
    const { port } = await listen(server, config.port, config.host, 'PORT, HOST');
    config = listeningOn(config, port);
    // Told to stop while it was getting the port: stop() has closed the server already.
    if (waiting.signal.aborted) server.close();
    else logger.info('listening', { issuer: config.issuer, port: config.port, store: config.store.split(':')[0], pid: process.pid });
  };

  let serving: Serving | undefined;
  const stop = async (signal: string) => {
    if (stopping) return;
    logger.info('stopping', { signal });
    waiting.abort();
    stopping = true;
    for (const response of inFlight) if (!response.headersSent) response.setHeader('Connection', 'close');
    // Stop accepting, let requests in flight finish, then close what is left. A server still
    // getting its port is closed once it has it (listening()): closing it before, in a worker,
    // makes node:cluster throw when the supervisor's answer arrives.
    const closed = server.listening ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
    server.closeIdleConnections();
    if (metricsServer) await stopServingMetrics(metricsServer);
    const deadline = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
    await closed;
    clearTimeout(deadline);
    serving?.stop();
    await store.close();
    // A worker's channel to its supervisor would keep it alive.
    leaveSupervisor();
  };
  // Every signal after the first is taken and ignored, not left to Node's default (an exit on the
  // spot, cutting the requests in flight): a worker gets one from its supervisor and another when
  // the operator signals the whole process group (systemd's default, Ctrl-C in a terminal).
  for (const signal of STOP_SIGNALS) process.on(signal, () => void stop(signal));

  // An issuer that names the port picked at listen is known only once listening, and the engine is configured with it.
  if (config.issuerFollowsListener) await listening();
  const revocations = new RevocationList(store.revocations);
  const keys = await whenStoreAnswers(store, async () => {
    const loaded = await loadKeys(store.settings, keyRing, config.jwksFile);
    await revocations.start();
    return loaded;
  }, { logger, signal: waiting.signal, whileWaiting: listening });
  if (!keys) return;
  serving = startServing({ config, store, keys, revocations, logger, metrics }, (service) => { handle = service; });
  // With the store answering at once, the service is what first answers on the port.
  await listening();
  if (alone) await hintWhenEmpty(store.accounts.countUsers(), config, logger);
}

/** What answers the server's requests: the starting service's, then the service's. */
type Handler = ReturnType<Koa['callback']>;

/** The service at work: what stop() ends. */
interface Serving {
  stop(): void;
}

/**
 * Hands `use` the service, and again each time the signing keys rotate: the engine takes its keys
 * once, so a rotation swaps in a service built with the new set, and requests in flight finish on
 * the one they started on (src/keys/rotation_watch.ts).
 */
function startServing(dependencies: ServiceDependencies, use: (handler: Handler) => void): Serving {
  const { config, store, keys, revocations, logger } = dependencies;
  const serviceWith = (material: KeyMaterial) => createService({ ...dependencies, keys: material }).app.callback();
  use(serviceWith(keys));
  const keyWatch = config.jwksFile ? undefined : watchSigningKeys({
    settings: store.settings, keyRing: keys.keyRing, policy: config.keyRotation, logger, initial: keys.jwks,
    onChange: (jwks) => use(serviceWith({ ...keys, jwks })),
  });
  return {
    stop() {
      keyWatch?.stop();
      revocations.stop();
    },
  };
}

/**
 * With no users yet, says how to make the first ones: in the log, and in plain words to a person
 * at a terminal (on `memory:`, that none can be made). A store that stops answering just then is
 * not worth stopping for: no hint.
 */
async function hintWhenEmpty(users: Promise<number>, config: Config, logger: Logger): Promise<void> {
  if (await users.catch(() => undefined) !== 0) return;
  if (config.store === 'memory:') {
    // The admin CLI opens the store itself, and this one lives only in this process.
    logger.warn('no users yet, and none can be added: STORE=memory: lives in this process alone, out of the admin CLI\'s reach (it is for tests); to try the service, start it on a sqlite: file (the default) or Redis and create the first users with npm run admin -- quickstart');
    return;
  }
  // Run in another terminal, the quickstart sees none of this process's environment: the command carries what it must share.
  const { command, admin, secretSettings } = quickstartCommand(config, process.env);
  const secrets = secretSettings.join(' and ');
  logger.warn('no users yet: create the first workspace, its admin and a demo client with the admin CLI', {
    command,
    ...(secrets ? { set_as_for_the_service: secrets } : {}),
    separately: `${admin} workspace create, then user create, with the same settings (${admin} --help)`,
  });
  if (process.stderr.isTTY) {
    const also = secrets ? `\nwith ${secrets} set as for this service too (not repeated here: ${secretSettings.length > 1 ? 'they hold secrets' : 'it holds a secret'}).\n` : '';
    process.stderr.write(`\nNo users yet. To create the first workspace, its admin and a demo client to try it with, run:\n\n    ${command}\n${also}\n`);
  }
}

main().catch((error: unknown) => {
  // One line for a configuration error (a key-encryption key or a port is one too); a fault shows its stack.
  const problem = configurationProblem(error);
  const line = problem === undefined ? undefined : configurationErrorLine(problem);
  // A worker leaves its line to the supervisor, which says it once for all of them and stops them.
  if (line !== undefined && cluster.isWorker) return stopWorkerOnConfigurationError(line);
  process.stderr.write(`${line ?? (error as Error).stack ?? String(error)}\n`);
  // Exit now: what had started (the metrics listener, the store's timers) would keep a process
  // that can never serve alive, and an orchestrator could neither restart it nor route around it.
  process.exit(1);
});
