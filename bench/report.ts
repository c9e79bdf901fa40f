import type { CryptoLimits } from './crypto_limits.ts';
import type { LoadResult } from './load.ts';
import type { MachineInfo } from './machine.ts';
import type { ScenarioRun } from './rounds.ts';
import { SIDES, type Side } from './target.ts';

/** Turns rounds into medians and prints them side by side, for people (a table) and programs (JSON). */

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
  /** Service req/s over baseline req/s (medians). */
  ratio: number;
  sides: Record<Side, SideSummary>;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
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

export function summarize(run: ScenarioRun): ScenarioSummary {
  const sides = {
    service: summarizeSide(run.rounds.service, run.rssBefore.service),
    baseline: summarizeSide(run.rounds.baseline, run.rssBefore.baseline),
  };
  return { scenario: run.scenario, summary: run.summary, ratio: sides.service.requestsPerSecond / sides.baseline.requestsPerSecond, sides };
}

const MB = 1024 * 1024;
const mb = (bytes: number | undefined) => (bytes === undefined ? '?' : (bytes / MB).toFixed(1));
const fixed = (value: number | undefined, digits: number) => (value === undefined || Number.isNaN(value) ? '?' : value.toFixed(digits));
const thousands = (value: number) => Math.round(value).toLocaleString('en-US');

const COLUMNS: Array<[header: string, width: number]> = [
  ['scenario', 19], ['server', 9], ['req/s', 8], ['svc/base', 9], ['p50 ms', 8], ['p99 ms', 8], ['errors', 7],
  ['RSS MB', 8], ['srv cores', 10], ['srv main', 9], ['bench cores', 12], ['req/s by round', 0],
];

function row(cells: string[]): string {
  return cells.map((cell, i) => {
    const [, width] = COLUMNS[i]!;
    return i < 2 || width === 0 ? cell.padEnd(width) : cell.padStart(width);
  }).join(' ').trimEnd();
}

export function formatReport(machine: MachineInfo, crypto: CryptoLimits | undefined, settings: RunSettings, summaries: readonly ScenarioSummary[]): string {
  const lines: string[] = [];
  lines.push(`Benchmark: this service vs bare oidc-provider ${machine.engineVersion}   ${machine.date}`);
  lines.push(`machine:   ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, load average ${machine.loadAverage.join(' ')} at start`);
  lines.push(`service:   ${machine.revision}, STORE=${settings.store}, LOG_LEVEL=${settings.logLevel}, WORKERS=${settings.workers}; baseline: bare engine, Map storage`);
  lines.push(`load:      autocannon, ${settings.connections} connections, ${settings.duration} s rounds, ${settings.rounds} per server alternating service/baseline `
    + `after a ${settings.warmup} s warm-up each; medians of rounds (errors: totals)`);
  if (crypto) {
    lines.push(`crypto:    jose ES256 on one core: ${thousands(crypto.es256SignPerSecond)} signatures/s, ${thousands(crypto.es256VerifyPerSecond)} verifications/s`);
  }
  lines.push('');
  lines.push(row(COLUMNS.map(([header]) => header)));
  for (const summary of summaries) {
    for (const side of SIDES) {
      const s = summary.sides[side];
      lines.push(row([
        side === 'service' ? summary.scenario : '',
        side,
        thousands(s.requestsPerSecond),
        side === 'service' ? `${fixed(summary.ratio, 2)}x` : '',
        fixed(s.latencyP50, 1),
        fixed(s.latencyP99, 1),
        String(s.errors),
        mb(s.rssAfterBytes),
        fixed(s.serverCores, 2),
        fixed(s.serverMainThreadCores, 2),
        fixed(s.benchCores, 2),
        s.roundRequestsPerSecond.map(thousands).join(' '),
      ]));
    }
  }

  const notes: string[] = [];
  for (const summary of summaries) {
    notes.push(`${summary.scenario}: ${summary.summary}`);
    if (summary.scenario === 'rss') {
      const growth = SIDES.map((side) => {
        const s = summary.sides[side];
        return `${side} ${mb(s.rssBeforeBytes)} -> ${mb(s.rssAfterBytes)} MB after ${thousands(s.requests)} tokens`;
      });
      notes.push(`  RSS: ${growth.join('; ')}`);
    }
    for (const side of SIDES) {
      const s = summary.sides[side];
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
  lines.push('  bench cores: CPU of the load generator (autocannon, in this process). 1.00 = one core busy.');
  return lines.join('\n');
}

export function jsonReport(machine: MachineInfo, crypto: CryptoLimits | undefined, settings: RunSettings, summaries: readonly ScenarioSummary[], runs: readonly ScenarioRun[]): string {
  return JSON.stringify({ machine, crypto, settings, scenarios: summaries, rounds: runs }, null, 2);
}
