import { expect } from 'chai';
import fc from 'fast-check';
import { AggregatorRegistry, Histogram, Registry } from 'prom-client';

import { FixedSeriesHistogram } from '../../src/http/metrics/fixed_series_histogram.ts';

const BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];
const NAME = 'store_operation_duration_seconds';
const HELP = 'Time a store operation took';

interface Observation {
  facet: string;
  operation: string;
  seconds: number;
}

const observations = fc.array(fc.record({
  facet: fc.constantFrom('RefreshToken', 'Grant', 'accounts', 'a "quoted" \\ facet'),
  operation: fc.constantFrom('find', 'upsert', 'getUser'),
  // Bucket bounds themselves included: a value equal to a bound counts in that bound's bucket.
  seconds: fc.oneof(fc.constantFrom(...BUCKETS, 0, 7), fc.double({ min: 0, max: 10, noNaN: true })),
}), { maxLength: 60 });

/** The same observations into prom-client's own Histogram and into a FixedSeriesHistogram, each in a registry of its own. */
function observedByBoth(seen: readonly Observation[]): { own: Registry; fixed: Registry } {
  const own = new Registry();
  const fixed = new Registry();
  const histogram = new Histogram({ name: NAME, help: HELP, labelNames: ['facet', 'operation'], buckets: BUCKETS, registers: [own] });
  const fixedHistogram = new FixedSeriesHistogram({ name: NAME, help: HELP, buckets: BUCKETS, registers: [fixed] });
  for (const { facet, operation, seconds } of seen) {
    histogram.labels(facet, operation).observe(seconds);
    fixedHistogram.series({ facet, operation })(seconds);
  }
  return { own, fixed };
}

/** The exposition's lines, sorted: the order of label sets is the order they were first seen in both, but that is not what a scraper relies on. */
const lines = (text: string) => text.split('\n').sort();

/**
 * Store operations are timed with a histogram kept in plain counts (an observation is a bucket
 * search and three additions); what a scrape shows must be what prom-client's Histogram shows for
 * the same observations, alone and summed over workers.
 */
describe('a histogram of fixed label sets', () => {
  it('is exposed exactly as prom-client\'s Histogram exposes the same observations', async () => {
    await fc.assert(fc.asyncProperty(observations, async (seen) => {
      const { own, fixed } = observedByBoth(seen);
      expect(lines(await fixed.metrics())).to.deep.equal(lines(await own.metrics()));
    }), { numRuns: 200 });
  });

  it('is summed over workers as prom-client sums its Histogram (WORKERS above 1)', async () => {
    await fc.assert(fc.asyncProperty(observations, observations, async (first, second) => {
      const workers = [observedByBoth(first), observedByBoth(second)];
      const summedOwn = AggregatorRegistry.aggregate(await Promise.all(workers.map(({ own }) => own.getMetricsAsJSON())));
      const summedFixed = AggregatorRegistry.aggregate(await Promise.all(workers.map(({ fixed }) => fixed.getMetricsAsJSON())));
      expect(lines(await summedFixed.metrics())).to.deep.equal(lines(await summedOwn.metrics()));
    }), { numRuns: 100 });
  });

  it('counts a label set asked for twice in one series', async () => {
    const registry = new Registry();
    const histogram = new FixedSeriesHistogram({ name: NAME, help: HELP, buckets: BUCKETS, registers: [registry] });
    histogram.series({ facet: 'Grant', operation: 'find' })(0.0002);
    histogram.series({ facet: 'Grant', operation: 'find' })(0.002);
    const text = await registry.metrics();
    expect(text).to.include(`${NAME}_count{facet="Grant",operation="find"} 2`);
    expect(text).to.include(`${NAME}_bucket{le="0.00025",facet="Grant",operation="find"} 1`);
    expect(text).to.include(`${NAME}_bucket{le="0.0025",facet="Grant",operation="find"} 2`);
  });
});
