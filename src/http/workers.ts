import cluster from 'node:cluster';

import type { Logger } from '../shared/logger.ts';

/** Pause before replacing a worker that died, so a worker that cannot start does not spin. */
const RESTART_DELAY_MS = 1000;

/**
 * `WORKERS=N`: this process forks N workers that each run the whole service on the same port
 * (node:cluster hands them connections in turn) over the one shared store, replaces a worker that
 * dies, and on SIGTERM or SIGINT passes the signal on and exits once every worker has finished.
 */
export function superviseWorkers(count: number, logger: Logger): void {
  let stopping = false;
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    logger.error('a worker stopped; starting another', { pid: worker.process.pid, code: code ?? undefined, signal: signal ?? undefined });
    setTimeout(() => cluster.fork(), RESTART_DELAY_MS).unref();
  });
  for (let i = 0; i < count; i += 1) cluster.fork();
  logger.info('workers started', { workers: count });

  const stop = (signal: NodeJS.Signals) => {
    stopping = true;
    logger.info('stopping workers', { signal });
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill(signal);
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
