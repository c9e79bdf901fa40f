import { expect } from 'chai';

import { api, createApiKey } from '../support/data_api.ts';
import { drillClient, expectNoReplay, openChains, serviceLoad } from '../support/drill.ts';
import { introspect, postCredentials, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';

const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 31).toString('base64url');

/**
 * The AOF restart drill: one Redis with its append-only file on, the service under steady mixed
 * load on it, redis-server killed with SIGKILL and started again on the same directory. While
 * Redis is down, every refusal is a 503 with Retry-After.
 *
 * With `appendfsync always` Redis fsyncs before it answers: every write the service acknowledged
 * before the kill is read back. With `everysec` Redis answers before its write reaches the file
 * when the previous second's fsync is still running (a busy disk): it holds the write back for up
 * to 2 s, so a killed process can lose the writes of its last seconds, as Redis documents. What is
 * checked then is that nothing older is lost, and what the service does with what is: a chain whose
 * last rotations were lost is refused invalid_grant (its user signs in again), never kept waiting.
 */
const EVERYSEC_MAY_LOSE_MS = 3_000;

for (const appendfsync of ['always', 'everysec']) {
  const writesMayBeLost = appendfsync === 'everysec';
  describe(`Redis restarted from its append-only file (appendfsync ${appendfsync}) after SIGKILL under load`, function () {
    this.timeout(120_000);
    let redis: RedisServer;
    let server: TestServer;
    let user: SeededUser;
    let client: RegisteredClient;

    before(async () => {
      redis = await startRedis(['--appendonly', 'yes', '--appendfsync', appendfsync]);
      server = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY, RATE_LIMITS: 'off' } });
      user = await seedUser(server);
      client = await registerClient(server.issuer, { client_name: 'AOF Drill App' });
    });

    after(async () => {
      await server?.stop();
      await redis?.stop();
    });

    const keeps = writesMayBeLost ? `every rotation, revocation and record acknowledged over ${EVERYSEC_MAY_LOSE_MS / 1000} s before the kill, refuses a chain whose later rotations were lost as invalid_grant,` : 'every rotation, revocation and record acknowledged before the kill,';
    it(`keeps ${keeps} and lets no rotated-out refresh token be redeemed again`, async () => {
      const apiKey = (await createApiKey(server, user.workspaces[0]!.id)).key;
      const drill = drillClient([server], client);
      const chains = await openChains(4, { instances: [server], client, user, next: drill.next });
      const load = serviceLoad({ chains, drill, client, apiKey, writesMayBeLost });
      await load.until('load acknowledged before the kill', () => load.rotations() >= 20 && load.acknowledged.revokedAccessTokens.length >= 3 && load.acknowledged.records.length >= 5, 30_000);

      const killedAt = Date.now();
      await redis.kill();
      // What Redis may have lost: acknowledged after this.
      const mayBeLost = (at: number) => writesMayBeLost && at > killedAt - EVERYSEC_MAY_LOSE_MS;
      await load.until('a request refused while Redis is down', () => load.refusedAt.some((at) => at > killedAt), 20_000);
      await redis.up();
      const restartedAt = Date.now();
      await load.until('every kind of write acknowledged again after the restart', () => load.writtenAt.some((at) => at > restartedAt)
        && chains.every((chain) => !chain.inDoubt) && load.refusedAt.every((at) => at < Date.now() - 1000), 60_000);
      await load.stop();
      console.log(`      AOF restart drill (appendfsync ${appendfsync}): ${load.rotations()} rotations, ${load.acknowledged.revokedAccessTokens.length} revocations, `
        + `${load.acknowledged.records.length} records acknowledged; ${load.refusedAt.length} refusals while Redis was down, all 503; `
        + `${load.doubted()} of ${chains.length} chains refused or cut mid-rotation, every one rotating again`
        + (writesMayBeLost ? `; ${chains.filter((chain) => chain.lost).length} chains lost their last rotations` : ''));
      expect(load.unexpected, 'answers during the drill').to.deep.equal([]);
      for (const chain of chains.filter((each) => each.lost)) {
        expect(mayBeLost(chain.receivedAt), `a chain lost whose refresh token was received ${killedAt - chain.receivedAt} ms before the kill`).to.equal(true);
      }

      // Every chain's last acknowledged refresh token works, those refused or cut at the kill included.
      for (const chain of chains.filter((each) => !each.lost)) expect((await drill.refresh(chain.refreshToken)).status).to.equal(200);
      const kept = (written: string) => !mayBeLost(load.acknowledged.at.get(written)!);
      for (const id of load.acknowledged.records.filter(kept)) expect((await api(server, `/rest/companies/${id}`, { credential: apiKey })).status, id).to.equal(200);
      for (const token of load.acknowledged.revokedAccessTokens.filter(kept)) expect((await introspect(server.issuer, postCredentials(client), token)).active, 'a revoked access token').to.equal(false);
      // Last, as a replay revokes the grant (its use was kept too).
      await expectNoReplay(chains, drill.refresh);
    });
  });
}
