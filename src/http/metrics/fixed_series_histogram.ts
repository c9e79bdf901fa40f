import type { Registry } from 'prom-client';

type Labels = Record<string, string>;

interface Sample {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

/** One label set's counts: `buckets[i]` observations at or under the i-th bound (not cumulative), the rest above all. */
interface Series {
  labels: Labels;
  buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * A Prometheus histogram whose label sets are each made once and kept by the caller, so an
 * observation is a bucket search and three additions. prom-client's Histogram checks and hashes
 * the labels on every observation, a child's too: for a metric observed many times a request
 * (every store operation, about ten a token refresh) that was a visible part of what the metrics
 * cost. It is registered in a prom-client registry as any metric is, so the exposition format,
 * the scrape and the sum over WORKERS are prom-client's: `get()` answers in the shape its own
 * Histogram does (cumulative `_bucket` samples with `le`, then `+Inf`, `_sum`, `_count`).
 */
export class FixedSeriesHistogram {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #bounds: readonly number[];
  readonly #series = new Map<string, Series>();

  constructor({ name, help, buckets, registers }: { name: string; help: string; buckets: readonly number[]; registers: readonly Registry[] }) {
    this.name = name;
    this.help = help;
    this.#bounds = [...buckets].sort((a, b) => a - b);
    // prom-client's registry takes any metric that answers get() as its own do; its types name only its own classes.
    for (const registry of registers) registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** The observer of one label set, made once (the same set again gets the same counts). */
  series(labels: Labels): (value: number) => void {
    const key = JSON.stringify(labels);
    let series = this.#series.get(key);
    if (!series) {
      series = { labels: { ...labels }, buckets: new Float64Array(this.#bounds.length + 1), sum: 0, count: 0 };
      this.#series.set(key, series);
    }
    const counted = series;
    const bounds = this.#bounds;
    return (value) => {
      let bucket = 0;
      while (bucket < bounds.length && value > bounds[bucket]!) bucket++;
      counted.buckets[bucket]! += 1;
      counted.sum += value;
      counted.count += 1;
    };
  }

  async get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: Sample[] }> {
    const values: Sample[] = [];
    for (const { labels, buckets, sum, count } of this.#series.values()) {
      let atOrUnder = 0;
      this.#bounds.forEach((bound, index) => {
        atOrUnder += buckets[index]!;
        values.push({ metricName: `${this.name}_bucket`, labels: { le: bound, ...labels }, value: atOrUnder });
      });
      values.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf', ...labels }, value: count });
      values.push({ metricName: `${this.name}_sum`, labels: { ...labels }, value: sum });
      values.push({ metricName: `${this.name}_count`, labels: { ...labels }, value: count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
