import { expect } from 'chai';

import { fuzzSettings } from './harness.ts';
import { serverErrorsInLog } from './checks.ts';
import { startFuzzWorld, type FuzzWorld } from './fixtures.ts';
import { browserFlows } from './browser_flows.ts';
import { discoveryAndRegistration } from './registration.ts';
import { resources } from './resources.ts';
import { fuzzSuite } from './suite.ts';
import { tokenEndpoints } from './token.ts';

/**
 * Every endpoint fuzzed (fast-check) with malformed, oversized, duplicated,
 * wrongly typed and wrongly encoded parameters, bodies and credentials, mostly around requests that
 * are valid but for what was changed, against one real server on a real SQLite file. Every
 * answer: no 5xx, no stack trace or internal name, the documented error shape (RFC 6749 5.2,
 * RFC 7591 3.2.2, RFC 6750 3 JSON; the error page for browser endpoints), and the store unchanged
 * by a refused request (test/fuzz/checks.ts). The properties are in test/fuzz/.
 *
 * FUZZ_RUNS sets the cases per property (default 100); FUZZ_RUNS=20000 is a long run. A failure
 * prints fast-check's seed: FUZZ_SEED=<seed> replays the same cases.
 */
describe('fuzzing: malformed, oversized, duplicated, mistyped and misencoded input at every endpoint', () => {
  let world: FuzzWorld | undefined;
  const suite = fuzzSuite(fuzzSettings(), () => {
    if (!world) throw new Error('the fuzz world is not started');
    return world;
  });

  before(async function () {
    this.timeout(90_000);
    world = await startFuzzWorld();
  });

  after(async () => {
    // FUZZ_STATS=1: the answers each endpoint gave, to see how deep the fuzzing went.
    if (process.env.FUZZ_STATS && world) console.log(world.prober.summary());
    await world?.stop();
  });

  discoveryAndRegistration(suite);
  browserFlows(suite);
  tokenEndpoints(suite);
  resources(suite);

  // A suite's own tests run before its inner suites: this one is a suite of its own, last.
  describe('afterwards', () => {
    it('the server logged no error and answered no 5xx to any of it', async () => {
      const w = suite.world();
      // The request log is written asynchronously: a last request's line marks that every earlier line is in.
      const marker = `/fuzz-finished-${Date.now()}`;
      await fetch(`${w.server.origin}${marker}`);
      while (!w.server.logs().includes(marker)) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(serverErrorsInLog(w.server.logs())).to.deep.equal([]);
    });
  });
});
