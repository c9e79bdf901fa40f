import cluster, { type Worker } from 'node:cluster';

import { AggregatorRegistry, type Aggregator, type Registry } from 'prom-client';

import type { Logger } from '../../shared/logger.ts';

/**
 * With WORKERS above 1 each worker holds only its own counts. The primary gathers every worker's
 * metrics over the cluster channel and sums them (prom-client's aggregation: counters and
 * histograms summed, the process gauges as PROCESS_AGGREGATORS says): for its own metrics listener
 * (METRICS=local), or for the worker a scrape of the shared port reached (METRICS=public), which
 * asks the primary. A worker that is replaced leaves its counters and histograms as they were at
 * the last scrape, added to every later sum: a sum never drops (Prometheus would read a drop as a
 * reset), and counts a worker made after that scrape, then died, are not in it.
 */

/** The primary answers within this, or the scrape fails (503) rather than show some workers only. */
const GATHER_TIMEOUT_MS = 3000;
const SCRAPE_TIMEOUT_MS = GATHER_TIMEOUT_MS + 1000;

type Message =
  | { type: 'metrics:ready' }
  | { type: 'metrics:scrape'; id: number }
  | { type: 'metrics:scraped'; id: number; text?: string; error?: string }
  | { type: 'metrics:report'; id: number }
  | { type: 'metrics:reported'; id: number; metrics: ReportedMetrics };

type ReportedMetrics = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

function isMessage(value: unknown): value is Message {
  const type = (value as { type?: unknown } | null)?.type;
  return typeof type === 'string' && type.startsWith('metrics:');
}

/**
 * In a worker: answers the primary's requests for this worker's metrics, and returns the scrape:
 * every worker's metrics, through the primary.
 */
export function scrapeThroughPrimary(registry: Registry): () => Promise<string> {
  const waiting = new Map<number, { resolve(text: string): void; reject(error: Error): void }>();
  let next = 0;
  process.on('message', (message: unknown) => {
    if (!isMessage(message)) return;
    if (message.type === 'metrics:report') {
      // Should collecting fail, the primary's wait runs out and the scrape is refused.
      registry.getMetricsAsJSON().then((metrics) => send({ type: 'metrics:reported', id: message.id, metrics }), ignore);
    } else if (message.type === 'metrics:scraped') {
      const waiter = waiting.get(message.id);
      waiting.delete(message.id);
      if (message.text !== undefined) waiter?.resolve(message.text);
      else waiter?.reject(new Error(message.error ?? 'the primary gave no metrics'));
    }
  });
  send({ type: 'metrics:ready' });
  return () => new Promise<string>((resolve, reject) => {
    const id = next++;
    const timer = setTimeout(() => {
      waiting.delete(id);
      reject(new Error('the primary did not answer with the workers\' metrics'));
    }, SCRAPE_TIMEOUT_MS);
    const done = <T>(settle: (value: T) => void) => (value: T) => {
      clearTimeout(timer);
      settle(value);
    };
    waiting.set(id, { resolve: done(resolve), reject: done(reject) });
    send({ type: 'metrics:scrape', id });
  });
}

function send(message: Message): void {
  // A closed channel (the worker is stopping) is no error worth a crash.
  process.send?.(message, undefined, undefined, ignore);
}

function sendTo(worker: Worker, message: Message): void {
  if (worker.isConnected()) worker.send(message, ignore);
}

const ignore = (): void => {};

/**
 * prom-client's default metrics that are no amounts to add up over the workers, and how one value
 * is made of theirs. The rest are summed: CPU seconds, memory and heap bytes, handles, GC time are
 * the instance's as the sum of its processes'.
 */
const PROCESS_AGGREGATORS: Readonly<Record<string, Aggregator>> = {
  // A limit of each process (every worker inherits the supervisor's): two workers cannot open
  // twice as many files each. The tightest, should one differ.
  process_max_fds: 'min',
  // The fullest worker's, so that process_open_fds / process_max_fds says how near one is to its limit.
  process_open_fds: 'max',
  // When the longest-serving worker started (prom-client omits it from sums: a sum of times is no time).
  process_start_time_seconds: 'min',
  // The same in every worker.
  nodejs_version_info: 'first',
  // How late the slowest worker's event loop runs: an average would hide a worker stuck on a long task.
  nodejs_eventloop_lag_seconds: 'max',
  nodejs_eventloop_lag_p50_seconds: 'max',
  nodejs_eventloop_lag_p90_seconds: 'max',
  nodejs_eventloop_lag_p99_seconds: 'max',
};

/** A worker's report with each default process metric set to be aggregated as PROCESS_AGGREGATORS says. */
function withProcessAggregators(metrics: ReportedMetrics): ReportedMetrics {
  return metrics.map((metric) => {
    const aggregator = PROCESS_AGGREGATORS[metric.name];
    return aggregator ? { ...metric, aggregator } : metric;
  });
}

/** A worker's metrics that only ever grow, which a sum keeps once the worker is gone. */
function cumulative(metrics: ReportedMetrics): ReportedMetrics {
  return metrics.filter((metric) => String(metric.type) === 'counter' || String(metric.type) === 'histogram');
}

/**
 * Reports summed into one, in a report's shape: prom-client's aggregate registers each sum as an
 * object that holds its name, type, values and aggregator, as a report's metrics do.
 */
function summed(reports: ReportedMetrics[]): ReportedMetrics {
  return AggregatorRegistry.aggregate(reports).getMetricsAsArray() as unknown as ReportedMetrics;
}

/** In the primary: gathers and sums the workers' metrics when a worker is scraped; returns the same scrape for the primary's own listener. */
export function aggregateWorkerMetrics(logger: Logger): () => Promise<string> {
  const ready = new Set<Worker>();
  const gathering = new Map<number, { pending: Set<Worker>; reports: Map<Worker, ReportedMetrics>; finish(): void }>();
  const lastReports = new Map<Worker, ReportedMetrics>();
  /** What replaced workers had counted by their last report, summed. */
  let retired: ReportedMetrics = [];
  let next = 0;

  const gather = (): Promise<string> => new Promise((resolve, reject) => {
    const id = next++;
    const pending = new Set(ready);
    const reports = new Map<Worker, ReportedMetrics>();
    const timer = setTimeout(() => {
      gathering.delete(id);
      reject(new Error(`${pending.size} worker(s) did not report their metrics in time`));
    }, GATHER_TIMEOUT_MS);
    const finish = () => {
      if (pending.size > 0) return;
      clearTimeout(timer);
      gathering.delete(id);
      for (const [worker, report] of reports) lastReports.set(worker, report);
      resolve(AggregatorRegistry.aggregate([retired, ...reports.values()]).metrics());
    };
    gathering.set(id, { pending, reports, finish });
    for (const worker of pending) {
      if (worker.isConnected()) sendTo(worker, { type: 'metrics:report', id });
      else pending.delete(worker);
    }
    finish();
  });

  cluster.on('message', (worker, message: unknown) => {
    if (!isMessage(message)) return;
    if (message.type === 'metrics:ready') {
      ready.add(worker);
    } else if (message.type === 'metrics:reported') {
      const round = gathering.get(message.id);
      if (!round?.pending.delete(worker)) return;
      round.reports.set(worker, withProcessAggregators(message.metrics));
      round.finish();
    } else if (message.type === 'metrics:scrape') {
      gather().then(
        (text) => sendTo(worker, { type: 'metrics:scraped', id: message.id, text }),
        (error: Error) => {
          logger.warn('could not gather the workers\' metrics', { error: error.message });
          sendTo(worker, { type: 'metrics:scraped', id: message.id, error: error.message });
        },
      );
    }
  });
  // A worker that stops is no longer waited for; what it had counted by its last report stays in
  // the sums, and a round under way leaves out its report so as not to count it twice.
  cluster.on('exit', (worker) => {
    ready.delete(worker);
    const last = lastReports.get(worker);
    lastReports.delete(worker);
    if (last) retired = summed([retired, cumulative(last)]);
    for (const round of gathering.values()) {
      round.reports.delete(worker);
      if (round.pending.delete(worker)) round.finish();
    }
  });
  return gather;
}
