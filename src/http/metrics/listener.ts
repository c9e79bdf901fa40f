import { createServer, type Server } from 'node:http';

import Koa from 'koa';

import { notFound } from '../../shared/http_error.ts';
import type { Logger } from '../../shared/logger.ts';
import { errorMapping, logConnectionErrors } from '../errors.ts';
import { listen } from '../listen.ts';
import { requestId } from '../request_id.ts';
import { METRICS_PATH, metricsEndpoint } from './endpoint.ts';

/**
 * METRICS=local, the default: `/metrics` on a listener of its own (METRICS_HOST:METRICS_PORT,
 * loopback unless the operator says otherwise), as Prometheus exporters do, and not on the
 * service's port, which is public: what the metrics show of traffic is the operator's. With
 * WORKERS above 1 the supervising process is the one that listens, and answers with every
 * worker's metrics summed (cluster.ts). Its answers are neither logged nor counted.
 */
export async function serveMetrics(settings: { host: string; port: number; token: string | undefined }, scrape: () => Promise<string>, logger: Logger): Promise<Server> {
  const app = new Koa();
  app.use(requestId(false));
  logConnectionErrors(app, logger);
  app.use(errorMapping(logger));
  app.use(metricsEndpoint(scrape, settings.token, logger));
  app.use(() => {
    throw notFound(`this listener serves ${METRICS_PATH} only`);
  });
  const server = createServer(app.callback());
  const { address, port } = await listen(server, settings.port, settings.host, 'METRICS_HOST, METRICS_PORT');
  logger.info('metrics listening', { host: address, port, url: `http://${address.includes(':') ? `[${address}]` : address}:${port}${METRICS_PATH}`, token: settings.token !== undefined });
  return server;
}

/** Stops the metrics listener: scrapes in flight are cut, a scraper retries. */
export function stopServingMetrics(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  return closed;
}
