import cluster, { type Worker } from 'node:cluster';

import { systemClock } from '../shared/clock.ts';
import type { Logger } from '../shared/logger.ts';
import { STOP_SIGNALS } from '../shared/stop_signals.ts';

/**
 * The pause before replacing a worker that died: doubled for each worker in a row that died
 * before it had served STABLE_AFTER_MS, up to RESTART_DELAY_MAX_MS, so a worker that cannot stay
 * up (a store it cannot reach, a fault at each start) is retried ever more slowly rather than
 * forked and logged every second; back to the first pause once a worker stays up.
 */
const RESTART_DELAY_MS = 1000;
const RESTART_DELAY_MAX_MS = 60_000;
const STABLE_AFTER_MS = 60_000;

/**
 * Exit code of a worker that stopped on a configuration error (EX_CONFIG of sysexits.h): a
 * replacement would stop the same way, so the supervisor stops instead of replacing it.
 */
const CONFIGURATION_ERROR_EXIT = 78;

/** How long a worker that reported a configuration error waits for the supervisor to stop it. */
const STOPPED_BY_SUPERVISOR_MS = 5000;

/** What a worker sends its supervisor when it cannot start for a configuration error. */
interface ConfigurationErrorMessage {
  configurationError: string;
}

/**
 * `WORKERS=N`: this process forks N workers that each run the whole service on the same port
 * (node:cluster hands them connections in turn) over the one shared store, replaces a worker that
 * dies, and on SIGTERM, SIGINT or SIGHUP passes the signal on and exits once every worker has finished.
 * A worker that cannot start for a configuration error (a port in use, a key that opens nothing)
 * is not replaced: its one line is said once, every worker is stopped, and this process exits 1,
 * as a single process would.
 */
export function superviseWorkers(count: number, logger: Logger): void {
  const live = new Set<Worker>();
  let stopping = false;
  let failed = false;
  const signalAll = (signal: NodeJS.Signals) => {
    for (const worker of live) worker.process.kill(signal);
  };
  const fail = (line: string) => {
    if (failed) return;
    failed = true;
    process.stderr.write(`${line}\n`);
    signalAll('SIGTERM');
  };
  const restarts = new Set<NodeJS.Timeout>();
  const startedAt = new WeakMap<Worker, number>();
  const fork = () => {
    const worker = cluster.fork();
    startedAt.set(worker, systemClock());
    live.add(worker);
  };
  let earlyDeaths = 0;
  const restartDelay = (worker: Worker): number => {
    const served = systemClock() - (startedAt.get(worker) ?? 0);
    earlyDeaths = served < STABLE_AFTER_MS ? earlyDeaths + 1 : 1;
    return Math.min(RESTART_DELAY_MS * 2 ** (earlyDeaths - 1), RESTART_DELAY_MAX_MS);
  };
  // A replacement is started only while the service is not stopping: a worker that died just
  // before a SIGTERM, while another is still finishing its requests, is not replaced.
  const replaceLater = (delay: number) => {
    const restart = setTimeout(() => {
      restarts.delete(restart);
      if (!stopping && !failed) fork();
    }, delay).unref();
    restarts.add(restart);
  };

  cluster.on('message', (_worker, message: unknown) => {
    if (isConfigurationError(message)) fail(message.configurationError);
  });
  cluster.on('exit', (worker, code, signal) => {
    live.delete(worker);
    if (code === CONFIGURATION_ERROR_EXIT) fail('configuration error: a worker stopped on a configuration error it could not report');
    if (failed) {
      if (live.size === 0) process.exit(1);
      return;
    }
    if (stopping) return;
    const delay = restartDelay(worker);
    logger.error('a worker stopped; starting another', { worker_pid: worker.process.pid, code: code ?? undefined, signal: signal ?? undefined, restart_in_ms: delay });
    replaceLater(delay);
  });
  for (let i = 0; i < count; i += 1) fork();
  logger.info('workers started', { workers: count });

  // Once only: a signal sent to the whole process group (systemd's default, Ctrl-C in a terminal)
  // reaches the workers from the operator as well as from here, and each worker takes one (main.ts).
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    for (const restart of restarts) clearTimeout(restart);
    logger.info('stopping workers', { signal });
    signalAll(signal);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, () => stop(signal));
}

/**
 * In a worker that cannot start for a configuration error: hands its one line to the supervisor,
 * which says it once (every worker meets the same error at about the same time) and stops them
 * all. Should the supervisor not stop this worker, it exits with CONFIGURATION_ERROR_EXIT, which
 * says as much.
 */
export function stopWorkerOnConfigurationError(line: string): void {
  if (!process.connected || !process.send) {
    // No supervisor to tell. Gone: said here, then. Left by this worker as it stops, on a signal its
    // supervisor passed on (an operator's, or its own when another worker met the error first and it
    // said so): the service is stopping, and there is nothing to add.
    if (!leftSupervisor) process.stderr.write(`${line}\n`);
    process.exit(CONFIGURATION_ERROR_EXIT);
  }
  const message: ConfigurationErrorMessage = { configurationError: line };
  process.exitCode = CONFIGURATION_ERROR_EXIT;
  process.send(message);
  // The channel keeps this process alive until the supervisor stops it; should it not, this does.
  setTimeout(() => process.exit(CONFIGURATION_ERROR_EXIT), STOPPED_BY_SUPERVISOR_MS).unref();
}

/** Whether this worker disconnected from its supervisor itself, as it stops (leaveSupervisor). */
let leftSupervisor = false;

/** In a worker that is stopping: lets go of its channel to the supervisor, which would keep it alive. */
export function leaveSupervisor(): void {
  leftSupervisor = true;
  cluster.worker?.disconnect();
}

function isConfigurationError(message: unknown): message is ConfigurationErrorMessage {
  return typeof message === 'object' && message !== null && typeof (message as { configurationError?: unknown }).configurationError === 'string';
}
