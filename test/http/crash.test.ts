import { expect } from 'chai';

import { api, createApiKey } from '../support/data_api.ts';
import { newChain, rotated, untilStopped, type Chain, type TokenSet } from '../support/drill.ts';
import { codeRequest, exchangeCode, introspect, postCredentials, registerClient, revokeToken, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually, sleep } from '../support/wait.ts';

/**
 * The crash drill: the service on a SQLite file under steady mixed load, killed with SIGKILL in the
 * middle of it, restarted on the same file. Everything it answered with a 2xx must be there after:
 * a client told of a rotation, a revocation or a record relies on it.
 */
describe('SQLite: a crash under load loses no acknowledged write', function () {
  this.timeout(120_000);
  let server: TestServer;
  let user: SeededUser;
  let client: RegisteredClient;

  before(async () => {
    server = await startServer({ env: { RATE_LIMITS: 'off' } });
    user = await seedUser(server);
    client = await registerClient(server.issuer, { client_name: 'Crash Drill App' });
  });

  after(async () => {
    await server?.stop();
  });

  const credentials = () => postCredentials(client);
  const refresh = (refreshToken: string) => tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...credentials() });

  it('keeps every rotation, revocation, code exchange and record it answered before SIGKILL, and lets no used code or refresh token be redeemed again', async () => {
    const workspaceId = user.workspaces[0]!.id;
    const apiKey = (await createApiKey(server, workspaceId)).key;
    // A user agent's first authorization shows the login and consent pages, later ones redirect with a code at
    // once, under the grant its session holds: each chain below has a grant of its own, the code worker one for all its codes.
    const mintCode = async (agent = new UserAgent()) => {
      const { url, verifier } = codeRequest(server.issuer, client.client_id);
      const callback = await authorize(agent, url, server.origin, { email: user.email, password: user.password });
      return { code: callback.searchParams.get('code')!, verifier };
    };
    const exchange = async (minted: { code: string; verifier: string }) => {
      const response = await exchangeCode(server.issuer, client, minted.code, minted.verifier);
      expect(response.status).to.equal(200);
      return response.json() as Promise<TokenSet>;
    };

    const rotating: Chain[] = [];
    for (let i = 0; i < 6; i += 1) rotating.push(newChain(await exchange(await mintCode())));
    // Chains whose refresh token is revoked under load (which revokes the grant, its access tokens with it).
    const toRevoke = await Promise.all([1, 2, 3].map(async () => exchange(await mintCode())));

    const acknowledged = {
      exchanged: [] as Array<{ code: string; verifier: string; chain: Chain }>,
      revokedAccessTokens: [] as string[],
      revokedGrants: [] as TokenSet[],
      records: [] as string[],
    };
    const accessTokens: string[] = [];
    const unexpected: string[] = [];
    // Until the kill: a request the dead server leaves unanswered then ends its worker.
    const load = { stopped: false };
    const worker = (step: () => Promise<void>) => untilStopped(load, step);
    const rotate = (chain: Chain) => worker(async () => {
      chain.inFlight = true;
      let response: Response;
      try {
        response = await refresh(chain.refreshToken);
      } catch (error) {
        if (load.stopped) chain.inDoubt = true;
        throw error;
      }
      chain.inFlight = false;
      if (response.status !== 200) {
        unexpected.push(`refresh: ${response.status} ${await response.text()}`);
        return;
      }
      const tokens = await response.json() as TokenSet;
      rotated(chain, tokens);
      accessTokens.push(tokens.access_token);
    });
    const codeAgent = new UserAgent();
    const exchangeCodes = worker(async () => {
      const minted = await mintCode(codeAgent);
      const response = await exchangeCode(server.issuer, client, minted.code, minted.verifier);
      if (response.status !== 200) {
        unexpected.push(`code exchange: ${response.status} ${await response.text()}`);
        return;
      }
      acknowledged.exchanged.push({ ...minted, chain: newChain(await response.json() as TokenSet) });
    });
    const revokeTokens = worker(async () => {
      const grant = toRevoke.shift();
      const token = grant?.refresh_token ?? accessTokens.shift();
      if (!token) return;
      const response = await revokeToken(server.issuer, client, token);
      if (response.status !== 200) {
        unexpected.push(`revocation: ${response.status} ${await response.text()}`);
        return;
      }
      if (grant) acknowledged.revokedGrants.push(grant);
      else acknowledged.revokedAccessTokens.push(token);
    });
    const createRecords = worker(async () => {
      const response = await api<{ data: { company: { id: string } } }>(server, '/rest/companies', { credential: apiKey, json: { name: `Crash ${acknowledged.records.length}` } });
      if (response.status !== 201) {
        unexpected.push(`record: ${response.status} ${JSON.stringify(response.body)}`);
        return;
      }
      acknowledged.records.push(response.body.data.company.id);
    });
    const workers = [...rotating.map(rotate), exchangeCodes, revokeTokens, createRecords].map((running) => running.catch((error: unknown) => {
      unexpected.push(`a worker failed: ${String(error)}`);
    }));

    // Mid-load: every kind of write acknowledged a few times, and some chains between two requests (those must keep their last token).
    const rotations = () => rotating.reduce((sum, chain) => sum + chain.consumed.length, 0);
    const progress = () => `${rotations()} rotations, ${acknowledged.exchanged.length} codes, ${acknowledged.revokedGrants.length} grants and `
      + `${acknowledged.revokedAccessTokens.length} access tokens revoked, ${acknowledged.records.length} records; ${unexpected.join('; ')}`;
    await eventually('the load has been acknowledged a few times of each kind', () => rotations() >= 30 && acknowledged.exchanged.length >= 3
      && acknowledged.revokedGrants.length === 3 && acknowledged.revokedAccessTokens.length >= 5 && acknowledged.records.length >= 10
      && rotating.filter((chain) => !chain.inFlight).length >= 2, 30_000, 5).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}: ${progress()}`);
    });
    load.stopped = true;
    const crashed = server.crash();
    await Promise.all(workers);
    await crashed;
    expect(unexpected, 'answers under load').to.deep.equal([]);

    await server.restart();

    // Each chain's last refresh token still works; one whose rotation was in flight at the kill may have been rotated, never half:
    // its token is back, or asked to wait until the cut rotation is abandoned and then rotates, or spent by a rotation whose answer the kill cut.
    const settledRefresh = async (refreshToken: string) => {
      for (let tries = 0; ; tries += 1) {
        const response = await refresh(refreshToken);
        if (response.status !== 503 || tries === 3) return response;
        await sleep(Number(response.headers.get('retry-after')) * 1000);
      }
    };
    for (const chain of [...rotating, ...acknowledged.exchanged.map(({ chain }) => chain)]) {
      const response = await settledRefresh(chain.refreshToken);
      if (!chain.inDoubt) {
        expect(response.status, `the last refresh token received: ${await response.clone().text()}`).to.equal(200);
      } else if (response.status !== 200) {
        expect(response.status).to.equal(400);
        expect(await response.json()).to.include({ error: 'invalid_grant' });
      }
    }
    expect(rotating.filter((chain) => !chain.inDoubt).length, 'chains answered before the kill').to.be.at.least(2);

    for (const id of acknowledged.records) expect((await api(server, `/rest/companies/${id}`, { credential: apiKey })).status, id).to.equal(200);
    for (const token of acknowledged.revokedAccessTokens) expect(await introspect(server.issuer, credentials(), token)).to.deep.equal({ active: false });
    for (const grant of acknowledged.revokedGrants) {
      expect(await introspect(server.issuer, credentials(), grant.access_token)).to.deep.equal({ active: false });
      const response = await refresh(grant.refresh_token);
      expect(response.status).to.equal(400);
      expect(await response.json()).to.include({ error: 'invalid_grant' });
    }

    // Last, as a replay revokes the grant: no used code or rotated-out refresh token is redeemed again.
    for (const { code, verifier } of acknowledged.exchanged) {
      const response = await exchangeCode(server.issuer, client, code, verifier);
      expect(response.status).to.equal(400);
      expect(await response.json()).to.include({ error: 'invalid_grant' });
    }
    for (const token of rotating.flatMap((chain) => chain.consumed)) {
      const response = await refresh(token);
      expect(response.status).to.equal(400);
      expect(await response.json()).to.include({ error: 'invalid_grant' });
    }
  });
});
