import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import { expect } from 'chai';

import { runScenario, type RoundOptions } from '../../bench/load/rounds.ts';
import type { Scenario } from '../../bench/load/scenarios.ts';
import type { Side, Target } from '../../bench/load/target.ts';

/** A loopback server that notes when it answered its first and its last request. */
interface Recorder {
  server: Server;
  origin: string;
  first: number | undefined;
  last: number | undefined;
}

async function recorder(): Promise<Recorder> {
  const recorded: Recorder = { server: createServer(), origin: '', first: undefined, last: undefined };
  recorded.server.on('request', (_request, response) => {
    const now = performance.now();
    recorded.first ??= now;
    recorded.last = now;
    response.end('{"access_token":"x"}');
  });
  await new Promise<void>((resolve) => recorded.server.listen(0, '127.0.0.1', resolve));
  recorded.origin = `http://127.0.0.1:${(recorded.server.address() as AddressInfo).port}`;
  return recorded;
}

function targetAt(side: Side, origin: string): Target {
  // The rounds need the address and a process to read CPU from (this one); the scenario below uses nothing else.
  return { side, issuer: origin, process: { pid: process.pid, exited: () => false, output: () => '' } } as unknown as Target;
}

const scenario: Scenario = {
  name: 'client_credentials',
  summary: 'POST /token',
  plan: () => Promise.resolve({ method: 'POST', path: '/token', headers: {}, body: 'grant_type=client_credentials', expect: 'access_token' }),
};

const options = (together: boolean): RoundOptions => ({ rounds: 1, duration: 1, connections: 2, warmup: 0, rssTokens: 1, together });

/** `npm run bench -- --together` loads the servers in the same seconds; by default one after the other. */
describe('bench rounds', function () {
  this.timeout(20_000);
  let service: Recorder;
  let baseline: Recorder;

  beforeEach(async () => {
    [service, baseline] = [await recorder(), await recorder()];
  });
  afterEach(() => {
    for (const { server } of [service, baseline]) server.close();
  });

  it('with together, loads every server during the same seconds', async () => {
    const run = await runScenario(scenario, [targetAt('service', service.origin), targetAt('baseline', baseline.origin)], options(true), () => undefined);
    expect(run.rounds.service).to.have.length(1);
    expect(run.rounds.baseline).to.have.length(1);
    // Each server was still answering when the other started.
    expect(baseline.first!).to.be.below(service.last!);
    expect(service.first!).to.be.below(baseline.last!);
  });

  it('by default, loads one server after the other', async () => {
    await runScenario(scenario, [targetAt('service', service.origin), targetAt('baseline', baseline.origin)], options(false), () => undefined);
    expect(baseline.first!).to.be.above(service.last!);
  });
});
