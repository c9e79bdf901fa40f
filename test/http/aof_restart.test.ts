import { expect } from 'chai';

import { api, createApiKey } from '../support/data_api.ts';
import { drillClient, expectNoReplay, openChains, serviceLoad } from '../support/drill.ts';
import { introspect, postCredentials, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';

const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 31).toString('base64url');

/**
 * The AOF restart drill: one Redis with its append-only file on, the service under steady mixed
 * load on it, redis-server killed with SIGKILL and started again on the same directory. Every
 * write the service acknowledged before the kill must be read back from the AOF. With
 * `appendfsync always` Redis fsyncs before it answers; with `everysec` the last second sits in the
 * OS's page cache, which a killed process does not take with it (only a power loss or an OS crash
 * would, which this cannot simulate). While Redis is down, every refusal is a 503 with Retry-After.
 */
for (const appendfsync of ['always', 'everysec']) {
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

    it('keeps every rotation, revocation and record acknowledged before the kill, and lets no rotated-out refresh token be redeemed again', async () => {
      const apiKey = (await createApiKey(server, user.workspaces[0]!.id)).key;
      const drill = drillClient([server], client);
      const chains = await openChains(4, { instances: [server], client, user, next: drill.next });
      const load = serviceLoad({ chains, drill, client, apiKey });
      await load.until('load acknowledged before the kill', () => load.rotations() >= 20 && load.acknowledged.revokedAccessTokens.length >= 3 && load.acknowledged.records.length >= 5, 30_000);

      const killedAt = Date.now();
      await redis.kill();
      await load.until('a request refused while Redis is down', () => load.refusedAt.some((at) => at > killedAt), 20_000);
      await redis.up();
      const restartedAt = Date.now();
      await load.until('every kind of write acknowledged again after the restart', () => load.writtenAt.some((at) => at > restartedAt)
        && chains.every((chain) => !chain.inDoubt) && load.refusedAt.every((at) => at < Date.now() - 1000), 60_000);
      await load.stop();
      console.log(`      AOF restart drill (appendfsync ${appendfsync}): ${load.rotations()} rotations, ${load.acknowledged.revokedAccessTokens.length} revocations, `
        + `${load.acknowledged.records.length} records acknowledged; ${load.refusedAt.length} refusals while Redis was down, all 503; `
        + `${load.doubted()} of ${chains.length} chains refused or cut mid-rotation, every one rotating again`);
      expect(load.unexpected, 'answers during the drill').to.deep.equal([]);

      // Every chain's last acknowledged refresh token works, those refused or cut at the kill included.
      for (const chain of chains) expect((await drill.refresh(chain.refreshToken)).status).to.equal(200);
      for (const id of load.acknowledged.records) expect((await api(server, `/rest/companies/${id}`, { credential: apiKey })).status, id).to.equal(200);
      for (const token of load.acknowledged.revokedAccessTokens) expect((await introspect(server.issuer, postCredentials(client), token)).active, 'a revoked access token').to.equal(false);
      // Last, as a replay revokes the grant (its use was kept too).
      await expectNoReplay(chains, drill.refresh);
    });
  });
}
