// `npm run test:alone`: the test files that run one at a time, after the others. Their tests kill
// processes and stores under load and time what follows (the failover and crash drills, start-up,
// workers, shutdown, restart); a busy neighbour would change what they measure. The one list:
// test/concurrent.mocharc.cjs leaves these out.
const ALONE = [
  'test/http/cluster_failover.test.ts',
  'test/http/sentinel_failover.test.ts',
  'test/http/aof_restart.test.ts',
  'test/http/replica_wait.test.ts',
  'test/store/replica_wait.test.ts',
  'test/http/crash.test.ts',
  'test/http/outage.test.ts',
  'test/http/start_up.test.ts',
  'test/http/workers.test.ts',
  'test/http/shutdown.test.ts',
  'test/http/restart.test.ts',
];

module.exports = { ...require('../.mocharc.json'), parallel: false, spec: ALONE };
