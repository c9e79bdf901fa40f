import { dumpInstructions, type InstructionCount } from '../processes.ts';
import { runLoad } from './load.ts';
import { median } from '../report/report.ts';
import { measuredTargets } from './rounds.ts';
import type { Scenario, ScenarioName } from './scenarios.ts';
import type { Side, Target } from './target.ts';

/**
 * `--instructions N`: each server runs under callgrind, and each scenario is counted in
 * instructions instead of timed: N requests after 2N of warm-up (so the JIT has compiled what is
 * hot), in WINDOWS windows of N/WINDOWS requests. Counts do not move with the machine's load, which
 * on these shared 2-core machines moves requests/s by up to ±30%, so a change of a few percent
 * shows. One window can still hold a rare expensive event (a full collection, the JIT optimising
 * or giving up on a function): the same code has counted 957k and 1,368k a request over one
 * window. The median window's count is reported, with the lowest and highest beside it.
 */
const WINDOWS = 5;

export interface InstructionOptions {
  requests: number;
  connections: number;
}

export interface InstructionRow {
  scenario: ScenarioName;
  side: Side;
  requests: number;
  errors: number;
  /** Per request, the median window's: the event loop's thread (JavaScript, and the collections it runs). */
  mainThread: number;
  /** The lowest and highest window's main-thread count per request. */
  mainThreadRange: [number, number];
  /** Per request, the median window's: every thread (the signing on libuv's pool, the collector's helpers too). */
  allThreads: number;
}

export async function countScenario(scenario: Scenario, allTargets: readonly Target[], options: InstructionOptions, progress: (line: string) => void): Promise<InstructionRow[]> {
  const rows: InstructionRow[] = [];
  for (const target of measuredTargets(scenario, allTargets)) {
    /** Plans a run (minting codes or refresh token chains, over requests of their own) and answers the run itself. */
    const planned = async (requests: number) => {
      const plan = await scenario.plan(target, { connections: options.connections, duration: 5, rssTokens: 0 });
      // A scenario run by count (minted codes) has as many requests as it minted, at most `requests`.
      const amount = Math.min(plan.amount ?? requests, requests);
      return () => runLoad(target.issuer, target.process.pid, { ...plan, amount }, { connections: options.connections, duration: 5, limitSeconds: 3600 });
    };
    progress(`${scenario.name} ${target.side}: ${2 * options.requests} requests of warm-up`);
    await (await planned(2 * options.requests))();
    const windows: Array<{ requests: number; errors: number; seconds: number; count: InstructionCount }> = [];
    for (let window = 1; window <= WINDOWS; window += 1) {
      const run = await planned(Math.ceil(options.requests / WINDOWS));
      // What came before (the warm-up, the plan's own requests) is left out of the window.
      await dumpInstructions(target.process);
      const counted = await run();
      windows.push({ requests: counted.requests, errors: counted.errors, seconds: counted.seconds, count: await dumpInstructions(target.process) });
    }
    const perRequest = (pick: (count: InstructionCount) => number) => windows.map(({ requests, count }) => Math.round(pick(count) / Math.max(1, requests)));
    const mainThread = perRequest((count) => count.mainThread);
    const row: InstructionRow = {
      scenario: scenario.name, side: target.side,
      requests: windows.reduce((sum, window) => sum + window.requests, 0), errors: windows.reduce((sum, window) => sum + window.errors, 0),
      mainThread: median(mainThread), mainThreadRange: [Math.min(...mainThread), Math.max(...mainThread)],
      allThreads: median(perRequest((count) => count.allThreads)),
    };
    rows.push(row);
    const seconds = windows.reduce((sum, window) => sum + window.seconds, 0);
    progress(`${scenario.name} ${target.side}: ${row.requests} requests in ${Math.round(seconds)} s, main thread per request by window: ${mainThread.join(' ')}`);
  }
  return rows;
}

export function formatInstructions(rows: readonly InstructionRow[], options: InstructionOptions): string {
  const thousands = (value: number) => `${Math.round(value / 1000).toLocaleString('en-US')}k`;
  const ratio = (value: number, base: number | undefined) => (base ? `${(value / base).toFixed(2)}x` : '');
  const lines = [
    `instructions per request (callgrind): ${options.requests} requests counted after ${2 * options.requests} of warm-up, in ${WINDOWS} windows, `
      + `${options.connections} connections; the median window's count`,
    '  main thread: the event loop (JavaScript and the collections it runs); all threads: with the signing on libuv\'s pool and the collector\'s helpers',
    '',
    `${'scenario'.padEnd(20)}${'server'.padEnd(17)}${'main thread'.padStart(12)}${'/base'.padStart(8)}${'windows'.padStart(17)}`
      + `${'all threads'.padStart(13)}${'/base'.padStart(8)}${'errors'.padStart(8)}`,
  ];
  for (const row of rows) {
    const base = rows.find((other) => other.scenario === row.scenario && other.side === 'baseline');
    const [lowest, highest] = row.mainThreadRange;
    lines.push(`${(rows.find((other) => other.scenario === row.scenario) === row ? row.scenario : '').padEnd(20)}${row.side.padEnd(17)}`
      + `${thousands(row.mainThread).padStart(12)}${ratio(row.mainThread, base?.mainThread).padStart(8)}${`${thousands(lowest)}-${thousands(highest)}`.padStart(17)}`
      + `${thousands(row.allThreads).padStart(13)}${ratio(row.allThreads, base?.allThreads).padStart(8)}${String(row.errors).padStart(8)}`);
  }
  return lines.join('\n');
}
