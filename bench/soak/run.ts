/**
 * `npm run soak -- --minutes N`: two instances of the service on one Redis, all started here on
 * free loopback ports, under steady mixed load at a moderate fixed rate for N minutes. Every
 * interval it samples each instance's RSS, Redis's used_memory and key count, and the interval's
 * p50/p99 latency and errors, prints them as a table as it goes, and ends with a verdict on
 * growth (samples.ts). Exits 1 when an instance's RSS grew beyond the threshold or operations
 * failed.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';

import { createApiKey } from '../../test/support/data_api.ts';
import { registerClient } from '../../test/support/oauth.ts';
import { redisCli, startRedis, type RedisServer } from '../../test/support/redis.ts';
import { seedUser, startServer, type TestServer } from '../../test/support/server.ts';
import { numberOption, runCommand, type Run } from '../command.ts';
import { residentBytes } from '../report/proc.ts';
import { startSoakLoad, type Outcome } from './load.ts';
import { formatHeader, formatRow, growthVerdict, percentile, type Sample } from './samples.ts';

const USAGE = `Usage: npm run soak -- [options]

  --minutes N       how long the load runs (default 30)
  --rate N          operations a second, over both instances (default 20); an operation is a
                    refresh rotation, a code exchange, a revocation, or a data record created,
                    read and deleted, in turn
  --interval S      seconds between samples (default 10)
  --threshold PCT   growth from the middle third to the last third flagged above this (default 10)
  -h, --help`;

interface SoakOptions {
  minutes: number;
  rate: number;
  interval: number;
  threshold: number;
}

function parseOptions(argv: string[]): SoakOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      minutes: { type: 'string', default: '30' },
      rate: { type: 'string', default: '20' },
      interval: { type: 'string', default: '10' },
      threshold: { type: 'string', default: '10' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return undefined;
  return {
    minutes: numberOption('--minutes', values.minutes, { min: 0.5 }),
    rate: numberOption('--rate', values.rate, { min: 1 }),
    interval: numberOption('--interval', values.interval, { min: 1 }),
    threshold: numberOption('--threshold', values.threshold, { min: 0 }) / 100,
  };
}

const deployment: { redis?: RedisServer; instances: TestServer[] } = { instances: [] };

async function stopAll(): Promise<void> {
  for (const instance of deployment.instances) await instance.stop().catch(() => undefined);
  await deployment.redis?.stop().catch(() => undefined);
}

async function soak(options: SoakOptions, { progress }: Run): Promise<number> {
  progress('starting Redis and two instances of the service');
  const redis = await startRedis();
  deployment.redis = redis;
  const env = { KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64url'), LOG_LEVEL: 'warn', RATE_LIMITS: 'off' };
  deployment.instances.push(await startServer({ store: redis.url, env }));
  deployment.instances.push(await startServer({ store: redis.url, env: { ...env, BASE_URL: deployment.instances[0]!.issuer } }));
  const { instances } = deployment;
  const user = await seedUser(instances[0]!);
  const client = await registerClient(instances[0]!.issuer, { client_name: 'Soak App' });
  const apiKey = (await createApiKey(instances[0]!, user.workspaces[0]!.id)).key;

  let interval: Outcome[] = [];
  const failures = new Map<string, number>();
  const load = await startSoakLoad({ instances, client, user, apiKey }, options.rate, (outcome) => {
    interval.push(outcome);
    if (!outcome.ok) failures.set(outcome.kind, (failures.get(outcome.kind) ?? 0) + 1);
  });
  progress(`${options.minutes} min at ${options.rate} operations/s, a sample every ${options.interval} s`);
  const started = Date.now();
  const samples: Sample[] = [];
  let skippedBefore = 0;
  process.stdout.write(`${formatHeader(instances.length)}\n`);
  while (Date.now() - started < options.minutes * 60_000) {
    await new Promise((resolve) => setTimeout(resolve, options.interval * 1000));
    const outcomes = interval;
    interval = [];
    const latencies = outcomes.map((outcome) => outcome.ms);
    const memory = await redisCli(redis.port, 'info', 'memory');
    const skipped = load.skipped();
    const sample: Sample = {
      at: (Date.now() - started) / 1000,
      rss: await Promise.all(instances.map((instance) => residentBytes(instance.pid() ?? 0))),
      redisUsedMemory: Number(/^used_memory:(\d+)/m.exec(memory)?.[1]),
      redisKeys: Number(await redisCli(redis.port, 'dbsize')),
      operations: outcomes.length,
      p50: percentile(latencies, 0.5),
      p99: percentile(latencies, 0.99),
      errors: outcomes.filter((outcome) => !outcome.ok).length,
      skipped: skipped - skippedBefore,
    };
    skippedBefore = skipped;
    samples.push(sample);
    process.stdout.write(`${formatRow(sample)}\n`);
  }
  await load.stop();

  const verdict = growthVerdict(samples, options.threshold);
  process.stdout.write(`\nGrowth, median of the last third against the middle third (flagged above ${(options.threshold * 100).toFixed(0)} %):\n`);
  for (const line of verdict) {
    process.stdout.write(`  ${line.what.padEnd(22)} ${line.middle.toFixed(1).padStart(9)} -> ${line.last.toFixed(1).padStart(9)}  ${(line.growth * 100).toFixed(1).padStart(6)} %${line.flagged ? '  GROWING' : line.judged ? '' : '  (reported, not judged)'}\n`);
  }
  process.stdout.write('  Redis grows until the records kept for their lifetime (used refresh tokens, revocations) start to expire.\n');
  const errors = [...failures].map(([kind, count]) => `${kind} ${count}`).join(', ');
  process.stdout.write(`Failed operations: ${errors || 'none'}\n`);
  const flagged = verdict.filter((line) => line.flagged);
  process.stdout.write(`Verdict: ${flagged.length ? `growing: ${flagged.map((line) => line.what).join(', ')}` : 'no growth beyond the threshold'}${errors ? '; operations failed' : ''}\n`);
  return flagged.length || errors ? 1 : 0;
}

runCommand({ name: 'soak', usage: USAGE, parse: parseOptions, run: soak, stop: stopAll });
