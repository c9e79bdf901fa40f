import type { CryptoLimits } from './crypto_limits.ts';
import type { LoadResult } from '../load/load.ts';
import type { MachineInfo } from './machine.ts';
import type { ScenarioRun } from '../load/rounds.ts';
import { SIDES, type Side } from '../load/target.ts';

/**
 * Turns rounds into medians and prints them side by side, for people (a table) and programs (JSON).
 * A ratio between two servers is the median of their ratios round by round: the two rounds of a
 * pair ran seconds apart, while this machine's speed drifts by tens of percent over a run, so a
 * ratio of the whole run's medians would compare rounds run on differently fast machines.
 */

export interface RunSettings {
  store: string;
  logLevel: string;
  /** The service's WORKERS. */
  workers: number;
  connections: number;
  duration: number;
  rounds: number;
  warmup: number;
  rssTokens: number;
  /** Every server loaded at once in each round (`--together`), not one after the other. */
  together: boolean;
  /** The other commit service_rev runs (`--against`), as the report names it; undefined without one. */
  against?: string | undefined;
}

export interface SideSummary {
  rounds: number;
  requests: number;
  /** Medians over the rounds. */
  requestsPerSecond: number;
  latencyP50: number;
  latencyP99: number;
  serverCores: number | undefined;
  serverMainThreadCores: number | undefined;
  benchCores: number;
  /** Totals over the rounds. */
  errors: number;
  /** 2xx responses without the expected content (counted in `errors`). */
  wrongBodies: number;
  statusCodes: Record<string, number>;
  /** Each round's req/s, to see the spread. */
  roundRequestsPerSecond: number[];
  rssBeforeBytes: number | undefined;
  /** After the last round. */
  rssAfterBytes: number | undefined;
  cutShort: boolean;
}

export interface ScenarioSummary {
  scenario: string;
  summary: string;
  /** Service req/s over baseline req/s (pairedRatio); absent for a service-only scenario. */
  ratio?: number;
  /** The same for the service with RATE_LIMITS=off METRICS=off. */
  offRatio?: number;
  /** The service's req/s over its own with RATE_LIMITS=off METRICS=off: 1 minus what counting costs. */
  againstOff?: number;
  /** The same for the service on its store's durable variant (--durable). */
  durableRatio?: number;
  /** service_durable's req/s over the service's: 1 minus what durability costs. */
  durableAgainstService?: number;
  /** The same for the service as another commit has it (--against). */
  revRatio?: number;
  /** The service's req/s over service_rev's: above 1 when this commit is faster than the other. */
  againstRev?: number;
  /**
   * The baseline is absent for a service-only scenario (the data API: the bare engine has none);
   * service_off with --without-off; service_durable without --durable; service_rev without --against.
   */
  sides: { service: SideSummary; service_off?: SideSummary; service_durable?: SideSummary; service_rev?: SideSummary; baseline?: SideSummary };
  /** Service-only: the service's req/s over the machine's single-core ES256 verifications/s (from crypto_limits.ts). */
  perEs256Verification?: number;
  /** Whether the credential's check is cached in the measured case. */
  caching?: string;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** The median, over the rounds both ran, of `numerator`'s req/s over `denominator`'s in the same round. */
export function pairedRatio(numerator: readonly LoadResult[], denominator: readonly LoadResult[]): number {
  const rounds = Math.min(numerator.length, denominator.length);
  return median(Array.from({ length: rounds }, (_, i) => numerator[i]!.requestsPerSecond / denominator[i]!.requestsPerSecond));
}

function summarizeSide(results: readonly LoadResult[], rssBefore: number | undefined): SideSummary {
  const statusCodes: Record<string, number> = {};
  for (const result of results) {
    for (const [code, count] of Object.entries(result.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count;
  }
  const known = (values: Array<number | undefined>) => values.filter((value): value is number => value !== undefined);
  const serverCores = known(results.map((result) => result.serverCores));
  const mainThreadCores = known(results.map((result) => result.serverMainThreadCores));
  return {
    rounds: results.length,
    requests: results.reduce((sum, result) => sum + result.requests, 0),
    requestsPerSecond: median(results.map((result) => result.requestsPerSecond)),
    latencyP50: median(results.map((result) => result.latencyP50)),
    latencyP99: median(results.map((result) => result.latencyP99)),
    serverCores: serverCores.length ? median(serverCores) : undefined,
    serverMainThreadCores: mainThreadCores.length ? median(mainThreadCores) : undefined,
    benchCores: median(results.map((result) => result.benchCores)),
    errors: results.reduce((sum, result) => sum + result.errors, 0),
    wrongBodies: results.reduce((sum, result) => sum + result.wrongBodies, 0),
    statusCodes,
    roundRequestsPerSecond: results.map((result) => result.requestsPerSecond),
    rssBeforeBytes: rssBefore,
    rssAfterBytes: results.at(-1)?.serverRssBytes,
    cutShort: results.some((result) => result.cutShort),
  };
}

export function summarize(run: ScenarioRun, crypto: CryptoLimits | undefined): ScenarioSummary {
  const service = summarizeSide(run.rounds.service, run.rssBefore.service);
  const off = run.rounds.service_off.length ? summarizeSide(run.rounds.service_off, run.rssBefore.service_off) : undefined;
  const durable = run.rounds.service_durable.length ? summarizeSide(run.rounds.service_durable, run.rssBefore.service_durable) : undefined;
  const rev = run.rounds.service_rev.length ? summarizeSide(run.rounds.service_rev, run.rssBefore.service_rev) : undefined;
  const { rounds } = run;
  const common = {
    scenario: run.scenario,
    summary: run.summary,
    ...(off ? { againstOff: pairedRatio(rounds.service, rounds.service_off) } : {}),
    ...(durable ? { durableAgainstService: pairedRatio(rounds.service_durable, rounds.service) } : {}),
    ...(rev ? { againstRev: pairedRatio(rounds.service, rounds.service_rev) } : {}),
  };
  const variants = { ...(off ? { service_off: off } : {}), ...(durable ? { service_durable: durable } : {}), ...(rev ? { service_rev: rev } : {}) };
  if (run.serviceOnly) {
    return {
      ...common,
      sides: { service, ...variants },
      ...(crypto ? { perEs256Verification: service.requestsPerSecond / crypto.es256VerifyPerSecond } : {}),
      ...(run.caching ? { caching: run.caching } : {}),
    };
  }
  const baseline = summarizeSide(run.rounds.baseline, run.rssBefore.baseline);
  return {
    ...common,
    ratio: pairedRatio(rounds.service, rounds.baseline),
    ...(off ? { offRatio: pairedRatio(rounds.service_off, rounds.baseline) } : {}),
    ...(durable ? { durableRatio: pairedRatio(rounds.service_durable, rounds.baseline) } : {}),
    ...(rev ? { revRatio: pairedRatio(rounds.service_rev, rounds.baseline) } : {}),
    sides: { service, ...variants, baseline },
  };
}

/** The sides a summary measured, in report order. */
function measuredSides(summary: ScenarioSummary): Array<[Side, SideSummary]> {
  return SIDES.flatMap((side) => {
    const s = summary.sides[side];
    return s ? [[side, s] as [Side, SideSummary]] : [];
  });
}

const MB = 1024 * 1024;
const mb = (bytes: number | undefined) => (bytes === undefined ? '?' : (bytes / MB).toFixed(1));
const fixed = (value: number | undefined, digits: number) => (value === undefined || Number.isNaN(value) ? '?' : value.toFixed(digits));
const thousands = (value: number) => Math.round(value).toLocaleString('en-US');

type Columns = Array<[header: string, width: number]>;

const COLUMNS: Columns = [
  ['scenario', 19], ['server', 15], ['req/s', 8], ['/base', 7], ['/off', 6], ['p50 ms', 8], ['p99 ms', 8], ['errors', 7],
  ['RSS MB', 8], ['srv cores', 10], ['srv main', 9], ['bench cores', 12], ['req/s by round', 0],
];

/** Service-only scenarios: no baseline, so req/s against one core's ES256 verifications/s instead. */
const SERVICE_ONLY_COLUMNS: Columns = [
  ['scenario', 23], ['server', 15], ['req/s', 8], ['/ES256 verify', 14], ['/off', 6], ['p50 ms', 8], ['p99 ms', 8], ['errors', 7],
  ['RSS MB', 8], ['srv cores', 10], ['srv main', 9], ['bench cores', 12], ['req/s by round', 0],
];

/** The service's req/s over its own without rate limits and metrics, on the service's row. */
const againstOff = (summary: ScenarioSummary, side: Side) => (side === 'service' && summary.againstOff !== undefined ? `${fixed(summary.againstOff, 2)}x` : '');

/** The ratio to the baseline a side's row shows. */
function baseRatio(summary: ScenarioSummary, side: Side): number | undefined {
  if (side === 'service') return summary.ratio;
  if (side === 'service_off') return summary.offRatio;
  if (side === 'service_rev') return summary.revRatio;
  return side === 'service_durable' ? summary.durableRatio : undefined;
}

function row(cells: string[], columns: Columns = COLUMNS): string {
  return cells.map((cell, i) => {
    const [, width] = columns[i]!;
    return i < 2 || width === 0 ? cell.padEnd(width) : cell.padStart(width);
  }).join(' ').trimEnd();
}

/** The columns every table shares after the comparison column. */
function measures(s: SideSummary): string[] {
  return [
    fixed(s.latencyP50, 1),
    fixed(s.latencyP99, 1),
    String(s.errors),
    mb(s.rssAfterBytes),
    fixed(s.serverCores, 2),
    fixed(s.serverMainThreadCores, 2),
    fixed(s.benchCores, 2),
    s.roundRequestsPerSecond.map(thousands).join(' '),
  ];
}

export function formatReport(machine: MachineInfo, crypto: CryptoLimits | undefined, settings: RunSettings, summaries: readonly ScenarioSummary[]): string {
  const lines: string[] = [];
  lines.push(`Benchmark: this service vs bare oidc-provider ${machine.engineVersion}   ${machine.date}`);
  lines.push(`machine:   ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, load average ${machine.loadAverage.join(' ')} at start`);
  lines.push(`service:   ${machine.revision}, STORE=${settings.store}, LOG_LEVEL=${settings.logLevel}, WORKERS=${settings.workers}; baseline: bare engine, Map storage`);
  if (settings.together) {
    lines.push(`load:      autocannon, ${settings.connections} connections to each server, every server loaded at once: ${settings.rounds} rounds of `
      + `${settings.duration} s after a ${settings.warmup} s warm-up; medians of rounds (errors: totals)`);
    lines.push('           /base and /off: the median of the two servers\' ratios round by round (each pair ran in the same seconds, sharing the cores:');
    lines.push('           req/s are lower than a server alone makes, the ratios are the point)');
  } else {
    lines.push(`load:      autocannon, ${settings.connections} connections, ${settings.duration} s rounds, ${settings.rounds} per server alternating `
      + `after a ${settings.warmup} s warm-up each; medians of rounds (errors: totals)`);
    lines.push('           /base and /off: the median of the two servers\' ratios round by round (each pair ran seconds apart)');
  }
  if (summaries.some((summary) => summary.sides.service_off)) {
    lines.push('           service_off: the service with RATE_LIMITS=off METRICS=off; /base: req/s over the baseline\'s; /off: the service\'s over service_off\'s');
  }
  if (summaries.some((summary) => summary.sides.service_durable)) {
    lines.push(`           service_durable: the service with ${settings.store === 'redis' ? 'a replica and REDIS_WAIT_REPLICAS=1' : 'SQLITE_SYNCHRONOUS=full'}; `
      + 'its req/s over the service\'s in the notes (1 minus what durability costs)');
  }
  if (settings.against !== undefined) {
    lines.push(`           service_rev: the service at ${settings.against}, with this checkout's node_modules; the notes give the service's req/s over service_rev's`);
  }
  if (summaries.some((summary) => !summary.sides.baseline)) {
    lines.push('           (data API scenarios: the service alone; errors: non-2xx, socket errors, timeouts, and 2xx without records)');
  }
  if (crypto) {
    lines.push(`crypto:    jose ES256 on one core: ${thousands(crypto.es256SignPerSecond)} signatures/s, ${thousands(crypto.es256VerifyPerSecond)} verifications/s`);
  }
  const compared = summaries.filter((summary) => summary.sides.baseline);
  const serviceOnly = summaries.filter((summary) => !summary.sides.baseline);
  if (compared.length) {
    lines.push('');
    lines.push(row(COLUMNS.map(([header]) => header)));
    for (const summary of compared) {
      for (const [side, s] of measuredSides(summary)) {
        const ratio = baseRatio(summary, side);
        lines.push(row([
          side === 'service' ? summary.scenario : '',
          side,
          thousands(s.requestsPerSecond),
          ratio === undefined ? '' : `${fixed(ratio, 2)}x`,
          againstOff(summary, side),
          ...measures(s),
        ]));
      }
    }
  }
  if (serviceOnly.length) {
    lines.push('');
    lines.push('Data API, the service alone (the bare engine has no data API); /ES256 verify: req/s over the machine\'s single-core');
    lines.push(`ES256 verifications/s (${crypto ? thousands(crypto.es256VerifyPerSecond) : '?'}/s, jose, above), the cost of checking one uncached token signature.`);
    lines.push('jose verifies through Node\'s WebCrypto, which runs the check on libuv\'s thread pool, off the JavaScript thread: uncached');
    lines.push('checks show in srv cores more than in srv main, and concurrent ones can use more than the one core measured above.');
    lines.push('');
    lines.push(row(SERVICE_ONLY_COLUMNS.map(([header]) => header), SERVICE_ONLY_COLUMNS));
    for (const summary of serviceOnly) {
      for (const [side, s] of measuredSides(summary)) {
        const perVerification = crypto ? `${fixed(s.requestsPerSecond / crypto.es256VerifyPerSecond, 2)}x` : '?';
        lines.push(row([side === 'service' ? summary.scenario : '', side, thousands(s.requestsPerSecond), perVerification, againstOff(summary, side), ...measures(s)], SERVICE_ONLY_COLUMNS));
      }
    }
  }

  const notes: string[] = [];
  for (const summary of summaries) {
    notes.push(`${summary.scenario}: ${summary.summary}`);
    if (summary.caching) notes.push(`  measured case: ${summary.caching}`);
    const durable = summary.sides.service_durable;
    if (durable && summary.durableAgainstService !== undefined) {
      notes.push(`  service_durable: ${fixed(summary.durableAgainstService, 2)}x the service's req/s; p50 ${fixed(summary.sides.service.latencyP50, 1)} -> ${fixed(durable.latencyP50, 1)} ms, `
        + `p99 ${fixed(summary.sides.service.latencyP99, 1)} -> ${fixed(durable.latencyP99, 1)} ms`);
    }
    const rev = summary.sides.service_rev;
    if (rev && summary.againstRev !== undefined) {
      notes.push(`  service over service_rev: ${fixed(summary.againstRev, 2)}x req/s; p50 ${fixed(rev.latencyP50, 1)} -> ${fixed(summary.sides.service.latencyP50, 1)} ms, `
        + `p99 ${fixed(rev.latencyP99, 1)} -> ${fixed(summary.sides.service.latencyP99, 1)} ms`);
    }
    if (summary.scenario === 'rss') {
      const growth = measuredSides(summary).map(([side, s]) => `${side} ${mb(s.rssBeforeBytes)} -> ${mb(s.rssAfterBytes)} MB after ${thousands(s.requests)} tokens`);
      notes.push(`  RSS: ${growth.join('; ')}`);
    }
    for (const [side, s] of measuredSides(summary)) {
      if (s.errors > 0) {
        notes.push(`  ${side}: ${s.errors} errors; responses by status: ${JSON.stringify(s.statusCodes)}; 2xx with the wrong content: ${s.wrongBodies}`);
      }
      if (s.cutShort) notes.push(`  ${side}: a run by count hit its time limit; the numbers cover what finished`);
    }
  }
  lines.push('', 'notes:', ...notes.map((note) => `  ${note}`));
  lines.push(`  RSS MB: the server's VmRSS after the scenario's last round. The baseline keeps every stored record (codes, refresh tokens,`);
  lines.push(`    grants, sessions) in its heap; the service keeps them in its store (STORE=${settings.store}).`);
  lines.push('  srv cores: CPU of the server process (all threads); srv main: its JavaScript thread alone (1.00 = the event loop never idle);');
  if (settings.workers > 1) lines.push(`    with WORKERS=${settings.workers}, RSS and both CPU columns add up the supervisor and its workers (srv main then at most ${settings.workers}.00);`);
  lines.push('  bench cores: CPU of the load generator (autocannon, in this process). 1.00 = one core busy.');
  return lines.join('\n');
}

export function jsonReport(machine: MachineInfo, crypto: CryptoLimits | undefined, settings: RunSettings, summaries: readonly ScenarioSummary[], runs: readonly ScenarioRun[]): string {
  return JSON.stringify({ machine, crypto, settings, scenarios: summaries, rounds: runs }, null, 2);
}
