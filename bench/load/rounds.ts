import { runLoad, type LoadPlan, type LoadResult } from './load.ts';
import { residentBytes } from '../report/proc.ts';
import type { RoundContext, Scenario, ScenarioName } from './scenarios.ts';
import { isService, SIDES, type Side, type Target } from './target.ts';

/**
 * One scenario, measured in alternating rounds (service, service_off, baseline, service, ...) so
 * that the machine's noise falls on every server alike, after an unrecorded warm-up of each; or,
 * with `together`, every server loaded at once in each round.
 */

export interface RoundOptions {
  rounds: number;
  duration: number;
  connections: number;
  warmup: number;
  rssTokens: number;
  /**
   * Load every server at once in each round (and warm-up), each with its own connections, instead
   * of one after the other: a round's ratio then compares what the servers made of the same
   * seconds of the machine, whose speed on these shared machines drifts by tens of percent within
   * a run. Each server gets part of the cores, so req/s are lower than alone, and a ratio under
   * contention can differ from the ratio alone: for comparing a change with what it runs beside.
   * Scenarios that run once (rss) still run one server at a time.
   */
  together: boolean;
}

export interface ScenarioRun {
  scenario: ScenarioName;
  summary: string;
  /** Measured on the service alone (with and without rate limits and metrics): the baseline's rounds are empty. */
  serviceOnly?: true;
  /** Whether the credential's check is cached in the measured case (the data API scenarios). */
  caching?: string;
  rounds: Record<Side, LoadResult[]>;
  /** Each server's VmRSS before the first measured round (for rss: before the bulk issuance). */
  rssBefore: Record<Side, number | undefined>;
}

/** Slack per round for planning (minting, registering) and for autocannon to drain its last requests. */
const ROUND_OVERHEAD_SECONDS = 30;

/** How long one run may take before it is stopped, whatever is left. */
function limitSeconds(scenario: Scenario, duration: number): number {
  return scenario.countLimitSeconds ?? duration + ROUND_OVERHEAD_SECONDS;
}

/** The servers a scenario measures: all of them, or the service's for a service-only scenario. */
export function measuredTargets<T extends { side: Side }>(scenario: Scenario, targets: readonly T[]): T[] {
  return scenario.serviceOnly ? targets.filter((target) => isService(target.side)) : [...targets];
}

/** The longest a scenario can take against `servers` servers, for the bench's overall time bound. */
export function worstCaseSeconds(scenario: Scenario, options: RoundOptions, servers: number): number {
  // Planning may mint for about a round's length before the run itself.
  const round = (duration: number) => duration + limitSeconds(scenario, duration) + ROUND_OVERHEAD_SECONDS;
  if (scenario.once) return servers * round(options.duration);
  return servers * ((options.warmup > 0 ? round(options.warmup) : 0) + options.rounds * round(options.duration));
}

export async function runScenario(scenario: Scenario, allTargets: readonly Target[], options: RoundOptions, progress: (line: string) => void): Promise<ScenarioRun> {
  const targets = measuredTargets(scenario, allTargets);
  const rounds = Object.fromEntries(SIDES.map((side) => [side, []])) as unknown as Record<Side, LoadResult[]>;
  const rssBefore = Object.fromEntries(SIDES.map((side) => [side, undefined])) as Record<Side, number | undefined>;
  const context = (duration: number): RoundContext => ({ connections: options.connections, duration, rssTokens: options.rssTokens });
  const load = (target: Target, plan: LoadPlan, duration: number) => runLoad(target.issuer, target.process.pid, plan, {
    connections: options.connections,
    duration,
    limitSeconds: limitSeconds(scenario, duration),
  });
  const together = options.together && !scenario.once;
  const planFor = (target: Target, duration: number) => {
    if (target.process.exited()) throw new Error(`${target.side} exited:\n${target.process.output()}`);
    return scenario.plan(target, context(duration));
  };
  // Every server's plan (minting codes, refresh token chains) is made before any load starts, so loads that run together start together.
  const runAll = async (duration: number, each: (target: Target, result: LoadResult) => void) => {
    if (together) {
      const plans: LoadPlan[] = [];
      for (const target of targets) plans.push(await planFor(target, duration));
      const results = await Promise.all(targets.map((target, i) => load(target, plans[i]!, duration)));
      targets.forEach((target, i) => each(target, results[i]!));
      return;
    }
    for (const target of targets) each(target, await load(target, await planFor(target, duration), duration));
  };

  if (!scenario.once && options.warmup > 0) {
    await runAll(options.warmup, (target, warm) => {
      progress(`${scenario.name} warm-up ${target.side}: ${Math.round(warm.requestsPerSecond)} req/s, ${warm.errors} errors`);
    });
  }
  for (const target of targets) rssBefore[target.side] = await residentBytes(target.process.pid);

  const count = scenario.once ? 1 : options.rounds;
  for (let round = 1; round <= count; round += 1) {
    await runAll(options.duration, (target, result) => {
      rounds[target.side].push(result);
      progress(`${scenario.name} round ${round}/${count} ${target.side}: ${describe(result)}`);
    });
  }
  return {
    scenario: scenario.name,
    summary: scenario.summary,
    ...(scenario.serviceOnly ? { serviceOnly: true } : {}),
    ...(scenario.caching ? { caching: scenario.caching } : {}),
    rounds,
    rssBefore,
  };
}

function describe(result: LoadResult): string {
  const codes = Object.entries(result.statusCodes).map(([code, n]) => `${code}×${n}`).join(' ');
  return `${Math.round(result.requestsPerSecond)} req/s over ${result.requests} requests, p50 ${result.latencyP50} ms, p99 ${result.latencyP99} ms, `
    + `${result.errors} errors (${codes}${result.socketErrors ? ` socket×${result.socketErrors}` : ''}${result.wrongBodies ? ` wrong-body×${result.wrongBodies}` : ''})`
    + `, server ${result.serverCores?.toFixed(2) ?? '?'} cores (main thread ${result.serverMainThreadCores?.toFixed(2) ?? '?'})`
    + `, bench ${result.benchCores.toFixed(2)} cores${result.cutShort ? ', CUT SHORT' : ''}`;
}
