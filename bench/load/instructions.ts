import { dumpInstructions, type InstructionCount } from '../processes.ts';
import { runLoad } from './load.ts';
import { measuredTargets } from './rounds.ts';
import type { Scenario, ScenarioName } from './scenarios.ts';
import type { Side, Target } from './target.ts';

/**
 * `--instructions N`: each server runs under callgrind, and each scenario is counted in
 * instructions instead of timed: N requests after 2N of warm-up (so the JIT has compiled what is
 * hot). Counts do not move with the machine's load, which on these shared 2-core machines moves
 * requests/s by up to ±30%, so a change of a few percent shows. They still vary by a few percent
 * between runs (when the JIT optimises, when a collection falls): compare counts of one run.
 */

export interface InstructionOptions {
  requests: number;
  connections: number;
}

export interface InstructionRow {
  scenario: ScenarioName;
  side: Side;
  requests: number;
  errors: number;
  /** Per request: the event loop's thread (JavaScript, and the collections it runs). */
  mainThread: number;
  /** Per request: every thread (the signing on libuv's pool, the collector's helpers too). */
  allThreads: number;
}

export async function countScenario(scenario: Scenario, allTargets: readonly Target[], options: InstructionOptions, progress: (line: string) => void): Promise<InstructionRow[]> {
  const rows: InstructionRow[] = [];
  for (const target of measuredTargets(scenario, allTargets)) {
    const run = async (requests: number) => {
      const plan = await scenario.plan(target, { connections: options.connections, duration: 5, rssTokens: 0 });
      // A scenario run by count (minted codes) has as many requests as it minted, at most `requests`.
      const amount = Math.min(plan.amount ?? requests, requests);
      return runLoad(target.issuer, target.process.pid, { ...plan, amount }, { connections: options.connections, duration: 5, limitSeconds: 3600 });
    };
    progress(`${scenario.name} ${target.side}: ${2 * options.requests} requests of warm-up`);
    await run(2 * options.requests);
    await dumpInstructions(target.process);
    const counted = await run(options.requests);
    const count: InstructionCount = await dumpInstructions(target.process);
    const perRequest = (instructions: number) => Math.round(instructions / Math.max(1, counted.requests));
    rows.push({
      scenario: scenario.name, side: target.side, requests: counted.requests, errors: counted.errors,
      mainThread: perRequest(count.mainThread), allThreads: perRequest(count.allThreads),
    });
    progress(`${scenario.name} ${target.side}: ${counted.requests} requests, ${perRequest(count.mainThread)} instructions each on the main thread`);
  }
  return rows;
}

export function formatInstructions(rows: readonly InstructionRow[], options: InstructionOptions): string {
  const thousands = (value: number) => `${Math.round(value / 1000).toLocaleString('en-US')}k`;
  const ratio = (value: number, base: number | undefined) => (base ? `${(value / base).toFixed(2)}x` : '');
  const lines = [
    `instructions per request (callgrind): ${options.requests} requests counted after ${2 * options.requests} of warm-up, ${options.connections} connections`,
    '  main thread: the event loop (JavaScript and the collections it runs); all threads: with the signing on libuv\'s pool and the collector\'s helpers',
    '',
    `${'scenario'.padEnd(20)}${'server'.padEnd(17)}${'main thread'.padStart(12)}${'/base'.padStart(8)}${'all threads'.padStart(13)}${'/base'.padStart(8)}${'errors'.padStart(8)}`,
  ];
  for (const row of rows) {
    const base = rows.find((other) => other.scenario === row.scenario && other.side === 'baseline');
    lines.push(`${(rows.find((other) => other.scenario === row.scenario) === row ? row.scenario : '').padEnd(20)}${row.side.padEnd(17)}`
      + `${thousands(row.mainThread).padStart(12)}${ratio(row.mainThread, base?.mainThread).padStart(8)}`
      + `${thousands(row.allThreads).padStart(13)}${ratio(row.allThreads, base?.allThreads).padStart(8)}${String(row.errors).padStart(8)}`);
  }
  return lines.join('\n');
}
