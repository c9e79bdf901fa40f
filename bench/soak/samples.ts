import { median } from '../report/report.ts';

/**
 * What the soak samples every interval, the table it prints, and its verdict on growth: for each
 * resource, the median of the last third of the samples against the median of the middle third
 * (the first third is warm-up: caches filling, the JIT settling). Only the instances' RSS is
 * judged; Redis's growth and the latency are reported (see Growth.judged).
 */

export interface Sample {
  /** Seconds since the load started. */
  at: number;
  /** Resident set size of each instance, bytes. */
  rss: Array<number | undefined>;
  redisUsedMemory: number;
  redisKeys: number;
  /** Operations finished in the interval. */
  operations: number;
  p50: number;
  p99: number;
  errors: number;
  skipped: number;
}

export function percentile(values: readonly number[], fraction: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}

const MB = 1024 * 1024;
const mb = (bytes: number | undefined) => (bytes === undefined ? '-' : (bytes / MB).toFixed(1));

export function formatRow(sample: Sample): string {
  return [
    `${sample.at.toFixed(0)}`.padStart(6),
    ...sample.rss.map((rss) => mb(rss).padStart(9)),
    mb(sample.redisUsedMemory).padStart(10),
    String(sample.redisKeys).padStart(7),
    String(sample.operations).padStart(5),
    sample.p50.toFixed(1).padStart(7),
    sample.p99.toFixed(1).padStart(7),
    String(sample.errors).padStart(6),
    String(sample.skipped).padStart(7),
  ].join(' ');
}

export function formatHeader(instances: number): string {
  return [
    's'.padStart(6),
    ...Array.from({ length: instances }, (_, i) => `rss${i + 1} MB`.padStart(9)),
    'redis MB'.padStart(10),
    'keys'.padStart(7),
    'ops'.padStart(5),
    'p50 ms'.padStart(7),
    'p99 ms'.padStart(7),
    'errors'.padStart(6),
    'skipped'.padStart(7),
  ].join(' ');
}

export interface Growth {
  what: string;
  middle: number;
  last: number;
  /** (last - middle) / middle. */
  growth: number;
  flagged: boolean;
  /**
   * Whether growth here means a leak. Redis's keys and memory grow by design until the records
   * kept for their lifetime start expiring (a used refresh token is kept to catch its reuse, a
   * revocation until the token would have expired), and latency follows whatever else the
   * machine runs: reported, not judged.
   */
  judged: boolean;
}

/** Each resource's growth from the middle third to the last third; flagged beyond `threshold` (0.1: 10 %). */
export function growthVerdict(samples: readonly Sample[], threshold: number): Growth[] {
  const third = Math.floor(samples.length / 3);
  const middle = samples.slice(third, 2 * third);
  const last = samples.slice(2 * third);
  type Series = [what: string, value: (sample: Sample) => number | undefined, judged: boolean];
  const inMb = (bytes: number | undefined) => (bytes === undefined ? undefined : bytes / MB);
  const series: Series[] = [
    ...samples[0]!.rss.map((_, i): Series => [`instance ${i + 1} RSS MB`, (sample) => inMb(sample.rss[i]), true]),
    ['p99 latency ms', (sample) => sample.p99, false],
    ['Redis used_memory MB', (sample) => inMb(sample.redisUsedMemory), false],
    ['Redis keys', (sample) => sample.redisKeys, false],
  ];
  return series.map(([what, value, judged]) => {
    const of = (part: readonly Sample[]) => median(part.map(value).filter((one): one is number => one !== undefined && Number.isFinite(one)));
    const before = of(middle);
    const after = of(last);
    const growth = before > 0 ? (after - before) / before : 0;
    return { what, middle: before, last: after, growth, flagged: judged && growth > threshold, judged };
  });
}
