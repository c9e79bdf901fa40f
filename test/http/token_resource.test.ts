import { expect } from 'chai';

import { REDIRECT_URI, codeRequest, exchangeCode, postCredentials, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * RFC 8707 `resource` at the token endpoint: a request naming another resource is refused before
 * anything is used up, so the client's retry with the same code or refresh token still works
 * (found by the fuzz suite: the engine used to consume first and refuse after).
 */
describe('token requests naming a resource', function () {
  this.timeout(30_000);

  let server: TestServer;
  let user: SeededUser;
  let client: RegisteredClient;
  let audience: string;

  before(async () => {
    server = await startServer();
    user = await seedUser(server);
    client = await registerClient(server.issuer);
    audience = `${server.issuer}/rest`;
  });

  after(async () => {
    await server?.stop();
  });

  async function code(): Promise<{ code: string; verifier: string }> {
    const request = codeRequest(server.issuer, client.client_id);
    const callback = await authorize(new UserAgent(), request.url, server.origin, { email: user.email, password: user.password });
    return { code: callback.searchParams.get('code')!, verifier: request.verifier };
  }

  async function expectInvalidTarget(response: Response): Promise<void> {
    expect(response.status).to.equal(400);
    const body = await response.json() as { error: string; error_description: string };
    expect(body.error).to.equal('invalid_target');
    expect(body.error_description).to.be.a('string').that.is.not.empty;
  }

  it('refuses an unknown resource at the code exchange without using the code up', async () => {
    const { code: value, verifier } = await code();
    await expectInvalidTarget(await exchangeCode(server.issuer, client, value, verifier, { resource: 'https://elsewhere.example/api' }));
    const retry = await exchangeCode(server.issuer, client, value, verifier);
    expect(retry.status, await retry.clone().text()).to.equal(200);
  });

  it('refuses two resources, or an unknown one, at a refresh without rotating the token, and the retry keeps the grant', async () => {
    const { code: value, verifier } = await code();
    const tokens = await (await exchangeCode(server.issuer, client, value, verifier, { resource: audience })).json() as { refresh_token: string };
    const refresh = (extra: Record<string, string> = {}, resources: string[] = []) => {
      const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...postCredentials(client), ...extra });
      for (const resource of resources) form.append('resource', resource);
      return fetch(`${server.issuer}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form });
    };
    await expectInvalidTarget(await refresh({}, ['https://elsewhere.example/api']));
    await expectInvalidTarget(await refresh({}, [audience, audience]));

    const retry = await refresh({}, [audience]);
    expect(retry.status, await retry.clone().text()).to.equal(200);
    const rotated = await retry.json() as { refresh_token: string };
    const next = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: rotated.refresh_token, ...postCredentials(client) });
    expect(next.status, 'the grant was not revoked as a replay').to.equal(200);
  });

  it('tells a caller without the client\'s secret nothing of a code or refresh token naming an API its grant lacks: invalid_client, as for any other', async () => {
    const mcp = `${server.issuer}/mcp`;
    const { code: value, verifier } = await code();
    const withoutSecret = { client_id: client.client_id };
    const wrongSecret = { client_id: client.client_id, client_secret: 'not-the-secret' };
    for (const credentials of [withoutSecret, wrongSecret]) {
      const live = await tokenRequest(server.issuer, { grant_type: 'authorization_code', code: value, redirect_uri: REDIRECT_URI, code_verifier: verifier, resource: mcp, ...credentials });
      const madeUp = await tokenRequest(server.issuer, { grant_type: 'authorization_code', code: 'made-up', redirect_uri: REDIRECT_URI, code_verifier: verifier, resource: mcp, ...credentials });
      expect([live.status, (await live.json() as { error: string }).error], 'a live code').to.deep.equal([madeUp.status, (await madeUp.json() as { error: string }).error]);
      expect(madeUp.status).to.equal(401);
    }
    // The client itself is told, and nothing is used up: its retry gets the tokens.
    await expectInvalidTarget(await exchangeCode(server.issuer, client, value, verifier, { resource: mcp }));
    const tokens = await (await exchangeCode(server.issuer, client, value, verifier, { resource: audience })).json() as { refresh_token: string };

    for (const credentials of [withoutSecret, wrongSecret]) {
      const live = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, resource: mcp, ...credentials });
      expect(live.status, 'a live refresh token').to.equal(401);
      expect(await live.json()).to.include({ error: 'invalid_client' });
    }
    await expectInvalidTarget(await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, resource: mcp, ...postCredentials(client) }));
    const retry = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, ...postCredentials(client) });
    expect(retry.status, 'the refresh token was not used up').to.equal(200);
  });

  it('answers a client that fails to authenticate invalid_client, not what is wrong with the resource it names (none of this server\'s, or two), whatever the grant; the code stays redeemable', async () => {
    const { code: value, verifier } = await code();
    const wrongSecret = { client_id: client.client_id, client_secret: 'not-the-secret' };
    const send = (fields: Record<string, string>, resources: string[]) => {
      const form = new URLSearchParams({ ...fields, ...wrongSecret });
      for (const resource of resources) form.append('resource', resource);
      return fetch(`${server.issuer}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form });
    };
    const grants: Array<Record<string, string>> = [
      { grant_type: 'authorization_code', code: value, redirect_uri: REDIRECT_URI, code_verifier: verifier },
      { grant_type: 'refresh_token', refresh_token: 'any-refresh-token' },
      { grant_type: 'client_credentials', scope: 'api' },
    ];
    for (const fields of grants) {
      for (const resources of [['https://elsewhere.example/api'], [audience, `${server.issuer}/mcp`]]) {
        const response = await send(fields, resources);
        const body = await response.json() as { error: string };
        expect([response.status, body.error], `${fields.grant_type} naming ${resources.join(' and ')}`).to.deep.equal([401, 'invalid_client']);
      }
    }
    await expectInvalidTarget(await exchangeCode(server.issuer, client, value, verifier, { resource: 'https://elsewhere.example/api' }));
    const retry = await exchangeCode(server.issuer, client, value, verifier);
    expect(retry.status, await retry.clone().text()).to.equal(200);
  });

  it('tells a public client\'s caller nothing of a code naming an API its grant lacks until the PKCE verifier checks out', async () => {
    const publicClient = await registerClient(server.issuer, { client_name: 'Public resource app', token_endpoint_auth_method: 'none' });
    const request = codeRequest(server.issuer, publicClient.client_id);
    const callback = await authorize(new UserAgent(), request.url, server.origin, { email: user.email, password: user.password });
    const value = callback.searchParams.get('code')!;
    const exchange = (code: string, verifier: string) => tokenRequest(server.issuer, {
      grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifier, client_id: publicClient.client_id, resource: `${server.issuer}/mcp`,
    });
    const wrongVerifier = 'x'.repeat(43);
    const live = await exchange(value, wrongVerifier);
    const madeUp = await exchange('made-up', wrongVerifier);
    expect([live.status, (await live.json() as { error: string }).error]).to.deep.equal([madeUp.status, (await madeUp.json() as { error: string }).error]);
    await expectInvalidTarget(await exchange(value, request.verifier));
  });

  it('refuses a resource given twice, once empty, as two (the engine would read both)', async () => {
    const { code: value, verifier } = await code();
    const form = new URLSearchParams({ grant_type: 'authorization_code', code: value, redirect_uri: REDIRECT_URI, code_verifier: verifier, ...postCredentials(client) });
    form.append('resource', '');
    form.append('resource', audience);
    await expectInvalidTarget(await fetch(`${server.issuer}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form }));
    expect((await exchangeCode(server.issuer, client, value, verifier)).status, 'the code was not used up').to.equal(200);
  });

  it('takes a resource sent without a value as none (RFC 6749 section 3.2)', async () => {
    const { code: value, verifier } = await code();
    const exchanged = await exchangeCode(server.issuer, client, value, verifier, { resource: '' });
    expect(exchanged.status, await exchanged.clone().text()).to.equal(200);
    const { refresh_token: refreshToken } = await exchanged.json() as { refresh_token: string };
    const refreshed = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, resource: '', ...postCredentials(client) });
    expect(refreshed.status, await refreshed.clone().text()).to.equal(200);
  });

  it('a rotated-out refresh token naming an API its grant lacks is still taken for a reuse: the grant is revoked', async () => {
    const { code: value, verifier } = await code();
    const first = await (await exchangeCode(server.issuer, client, value, verifier, { resource: audience })).json() as { refresh_token: string };
    const rotated = await (await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: first.refresh_token, ...postCredentials(client) })).json() as { refresh_token: string };

    const replay = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: first.refresh_token, resource: `${server.issuer}/mcp`, ...postCredentials(client) });
    expect(replay.status).to.equal(400);
    expect(await replay.json()).to.include({ error: 'invalid_grant' });
    const next = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: rotated.refresh_token, ...postCredentials(client) });
    expect(next.status, 'the latest refresh token, once a rotated-out one was replayed').to.equal(400);
  });

  it('takes a rotated-out refresh token or a used code for a replay, and revokes the grant, whatever resource the request names: none of this server\'s, or two', async () => {
    const form = (extra: Record<string, string | string[]>) => {
      const body = new URLSearchParams(postCredentials(client));
      for (const [name, values] of Object.entries(extra)) for (const value of [values].flat()) body.append(name, value);
      return fetch(`${server.issuer}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
    };
    for (const resource of ['https://unknown.example/', [audience, `${server.issuer}/mcp`]]) {
      const { code: value, verifier } = await code();
      const first = await (await exchangeCode(server.issuer, client, value, verifier, { resource: audience })).json() as { access_token: string; refresh_token: string };
      const rotated = await (await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: first.refresh_token, ...postCredentials(client) })).json() as { refresh_token: string };

      const replay = await form({ grant_type: 'refresh_token', refresh_token: first.refresh_token, resource });
      expect([replay.status, (await replay.json() as { error: string }).error], `a refresh token replayed naming ${resource}`).to.deep.equal([400, 'invalid_grant']);
      const next = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: rotated.refresh_token, ...postCredentials(client) });
      expect(next.status, 'the latest refresh token, once a rotated-out one was replayed').to.equal(400);

      const again = await code();
      const issued = await (await exchangeCode(server.issuer, client, again.code, again.verifier, { resource: audience })).json() as { refresh_token: string };
      const replayedCode = await form({ grant_type: 'authorization_code', code: again.code, redirect_uri: REDIRECT_URI, code_verifier: again.verifier, resource });
      expect([replayedCode.status, (await replayedCode.json() as { error: string }).error], `a code replayed naming ${resource}`).to.deep.equal([400, 'invalid_grant']);
      const afterCodeReplay = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: issued.refresh_token, ...postCredentials(client) });
      expect(afterCodeReplay.status, 'what the replayed code issued is revoked').to.equal(400);
    }
  });
});
