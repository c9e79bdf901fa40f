/**
 * `npm run bench`: this service against a bare oidc-provider baseline, side by side, on this machine.
 * Both run as child processes on loopback; autocannon drives them in alternating rounds; the
 * report gives medians, latencies, errors, memory and CPU for both. The data API scenarios
 * (data_api_*) run against the service alone, the engine having no data API, and are reported
 * against the machine's raw ES256 verification rate instead. See `npm run bench -- --help`.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';

import { startBaseline } from './baseline/start.ts';
import { numberOption, runCommand, UsageError, type Run } from './command.ts';
import { measureCryptoLimits } from './report/crypto_limits.ts';
import { machineInfo } from './report/machine.ts';
import { cleanUp, cleanUpNow, countInstructionsInto, profileServersInto, tempDir } from './processes.ts';
import { countScenario, formatInstructions, type InstructionRow } from './load/instructions.ts';
import { formatReport, jsonReport, summarize, type RunSettings } from './report/report.ts';
import { runScenario, worstCaseSeconds, type ScenarioRun } from './load/rounds.ts';
import { SCENARIO_NAMES, SCENARIOS, type Scenario, type ScenarioName } from './load/scenarios.ts';
import { checkOutCommit, type OtherCommit } from './service/other_commit.ts';
import { startService } from './service/start.ts';
import { STORE_KINDS, hasDurableVariant, isStoreKind, type StoreKind } from './service/stores.ts';
import type { Target } from './load/target.ts';

const USAGE = `Usage: npm run bench -- [options]

  --duration SECONDS    length of each round (default 6)
  --connections N       concurrent connections (default 32)
  --rounds N            rounds per server, alternating service/baseline (default 5)
                        or, with --together, loading them at once
  --scenario NAME       repeatable or comma-separated (default all):
                        ${SCENARIO_NAMES.join(', ')}
                        (data_api_*: the service alone, against the machine's ES256 verification rate)
  --store KIND          the service's storage: ${STORE_KINDS.join(' | ')} (default sqlite)
  --warmup SECONDS      unrecorded warm-up per server and scenario (default 5; 0 for none)
  --rss-tokens N        client_credentials tokens the rss scenario issues per server (default 100000)
  --log-level LEVEL     the service's LOG_LEVEL (default warn: request logging is not measured)
  --json                also print the results as JSON: JSON on stdout, the table on stderr
  --workers N           run the service with WORKERS=N (default 1; the baseline stays one process)
  --without-off         leave out service_off, the service with RATE_LIMITS=off METRICS=off that
                        shows what counting costs (on by default)
  --durable             also measure service_durable: the service on its store's durable variant,
                        SQLITE_SYNCHRONOUS=full (sqlite), or a replica and REDIS_WAIT_REPLICAS=1 (redis)
  --against REV         also measure service_rev: the service as commit REV has it (a copy made
                        with git archive, run with this checkout's node_modules), to judge a
                        change in the same run; the notes give the service's req/s over REV's.
                        Best with --together. REV must read the store this checkout seeds
  --together            load every server at once in each round (each with its own connections),
                        not one after the other: each round's ratio then compares the same
                        seconds of the machine, which drifts by tens of percent within a run;
                        req/s are lower than alone (the servers share the cores), and ratios
                        can differ from alone: for comparing a change, not the targets; not for rss
  --profile DIR         write each server's CPU profile (node --cpu-prof) under DIR/<server>/;
                        summarise one with: node bench/report/profile_summary.ts FILE.cpuprofile
  --instructions N      count instructions instead of timing: every server under valgrind's
                        callgrind, N requests per scenario counted in 5 windows after 2N of
                        warm-up, the median window's count reported (a few minutes per server
                        and scenario for N=1000); not for rss
  -h, --help`;

interface BenchOptions extends RunSettings {
  scenarios: ScenarioName[];
  store: StoreKind;
  json: boolean;
  /** Folder for the servers' V8 CPU profiles (`node --cpu-prof`), one subfolder a server. */
  profile: string | undefined;
  /** Also measure the service with RATE_LIMITS=off METRICS=off (service_off). */
  withOff: boolean;
  /** Also measure the service on its store's durable variant (service_durable). */
  durable: boolean;
  /** Requests counted per server and scenario under callgrind (`--instructions`); undefined: timed rounds. */
  instructions: number | undefined;
  /** The other commit to measure as service_rev (`--against`), as given. */
  againstRevision: string | undefined;
}

function parseOptions(argv: string[]): BenchOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      duration: { type: 'string', default: '6' },
      connections: { type: 'string', default: '32' },
      rounds: { type: 'string', default: '5' },
      scenario: { type: 'string', multiple: true },
      store: { type: 'string', default: 'sqlite' },
      warmup: { type: 'string', default: '5' },
      'rss-tokens': { type: 'string', default: '100000' },
      'log-level': { type: 'string', default: 'warn' },
      json: { type: 'boolean', default: false },
      profile: { type: 'string' },
      workers: { type: 'string', default: '1' },
      'without-off': { type: 'boolean', default: false },
      durable: { type: 'boolean', default: false },
      together: { type: 'boolean', default: false },
      against: { type: 'string' },
      instructions: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return undefined;

  const scenarios = (values.scenario ?? [...SCENARIO_NAMES]).flatMap((value) => value.split(',')).map((name) => name.trim()).filter(Boolean);
  const unknown = scenarios.filter((name) => !(SCENARIO_NAMES as readonly string[]).includes(name));
  if (unknown.length) throw new UsageError(`unknown scenario ${unknown.join(', ')}; known: ${SCENARIO_NAMES.join(', ')}`);
  if (!isStoreKind(values.store)) throw new UsageError(`--store must be one of ${STORE_KINDS.join(', ')}, got "${values.store}"`);
  if (values.durable && !hasDurableVariant(values.store)) throw new UsageError(`--durable needs a store that can be made more durable (sqlite, redis), not ${values.store}`);
  return {
    duration: numberOption('--duration', values.duration, { min: 1 }),
    connections: numberOption('--connections', values.connections, { min: 1, integer: true }),
    rounds: numberOption('--rounds', values.rounds, { min: 1, integer: true }),
    warmup: numberOption('--warmup', values.warmup, { min: 0 }),
    rssTokens: numberOption('--rss-tokens', values['rss-tokens'], { min: 1, integer: true }),
    // In run order, each once: the rss scenario last, since it grows the servers on purpose.
    scenarios: SCENARIO_NAMES.filter((name) => scenarios.includes(name)),
    store: values.store,
    logLevel: values['log-level'],
    json: values.json,
    profile: values.profile,
    workers: numberOption('--workers', values.workers, { min: 1, integer: true }),
    withOff: !values['without-off'],
    durable: values.durable,
    together: values.together,
    instructions: values.instructions === undefined ? undefined : numberOption('--instructions', values.instructions, { min: 100, integer: true }),
    againstRevision: values.against,
  };
}

async function bench(options: BenchOptions, { progress, abort }: Run): Promise<number> {
  if (options.profile) profileServersInto(resolve(options.profile));
  if (options.instructions !== undefined) {
    if (options.scenarios.includes('rss')) {
      process.stderr.write('--instructions counts requests; leave out the rss scenario\n');
      return 2;
    }
    countInstructionsInto(await tempDir('oauth-bench-callgrind-'));
  }

  // The whole run is bounded: every phase has a limit, and this catches anything that hangs anyway.
  const scenarios = options.scenarios.map((name) => SCENARIOS[name]);
  const services = 1 + (options.withOff ? 1 : 0) + (options.durable ? 1 : 0) + (options.againstRevision !== undefined ? 1 : 0);
  const servers = (scenario: Scenario) => services + (scenario.serviceOnly ? 0 : 1);
  const bound = options.instructions !== undefined
    ? 900 * (services + 1) + scenarios.reduce((sum, scenario) => sum + servers(scenario) * (240 + options.instructions! / 5), 0)
    : 120 + scenarios.reduce((sum, scenario) => sum + worstCaseSeconds(scenario, options, servers(scenario)), 0);
  const watchdog = setTimeout(() => void abort(`the run exceeded its time bound of ${bound} s`, 3), bound * 1000);
  progress(`${scenarios.map((s) => s.name).join(', ')}; at most ${Math.ceil(bound / 60)} min`);
  try {
    let other: OtherCommit | undefined;
    if (options.againstRevision !== undefined) {
      try {
        other = await checkOutCommit(options.againstRevision);
      } catch (error) {
        process.stderr.write(`${(error as Error).message}\n`);
        return 2;
      }
      options.against = other.label;
    }
    return await measure(options, scenarios, other, progress);
  } finally {
    clearTimeout(watchdog);
  }
}

async function measure(options: BenchOptions, scenarios: readonly Scenario[], other: OtherCommit | undefined, progress: (line: string) => void): Promise<number> {
  const report = options.json ? process.stderr : process.stdout;

  const machine = machineInfo();
  progress('measuring ES256 with jose on one core');
  const crypto = await measureCryptoLimits();

  // The data API scenarios measure the service alone: without others, the baseline is not started.
  const needsBaseline = scenarios.some((scenario) => !scenario.serviceOnly);
  progress(`starting the service (STORE ${options.store})${options.withOff ? ', the service with RATE_LIMITS=off METRICS=off' : ''}`
    + `${options.durable ? ', the service on the durable variant of its store' : ''}${needsBaseline ? ' and the baseline' : ''}`);
  const service = { store: options.store, logLevel: options.logLevel, workers: options.workers };
  const targets: Target[] = [await startService({ ...service, side: 'service' })];
  if (options.withOff) targets.push(await startService({ ...service, side: 'service_off' }));
  if (options.durable) targets.push(await startService({ ...service, side: 'service_durable' }));
  if (other) {
    progress(`starting the service at ${other.label}`);
    targets.push(await startService({ ...service, side: 'service_rev', root: other.root }));
  }
  if (needsBaseline) targets.push(await startBaseline());

  if (options.instructions !== undefined) {
    const counting = { requests: options.instructions, connections: Math.min(options.connections, 8) };
    const rows: InstructionRow[] = [];
    for (const scenario of scenarios) rows.push(...await countScenario(scenario, targets, counting, progress));
    report.write(`\nmachine: ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}; service ${machine.revision}; baseline: bare oidc-provider ${machine.engineVersion}\n${formatInstructions(rows, counting)}\n`);
    return rows.some((row) => row.errors > 0) ? 1 : 0;
  }

  const runs: ScenarioRun[] = [];
  for (const scenario of scenarios) runs.push(await runScenario(scenario, targets, options, progress));

  const summaries = runs.map((run) => summarize(run, crypto));
  report.write(`\n${formatReport(machine, crypto, options, summaries)}\n`);
  if (options.json) process.stdout.write(`${jsonReport(machine, crypto, options, summaries, runs)}\n`);

  const failed = summaries.filter((summary) => Object.values(summary.sides).some((side) => side.errors > 0));
  if (failed.length) {
    process.stderr.write(`\n[bench] errors in ${failed.map((summary) => summary.scenario).join(', ')}: those numbers are not comparable\n`);
    return 1;
  }
  return 0;
}

process.once('exit', cleanUpNow);
runCommand({ name: 'bench', usage: USAGE, parse: parseOptions, run: bench, stop: cleanUp });
