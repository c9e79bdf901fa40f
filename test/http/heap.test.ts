import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { expect } from 'chai';

import { api, clientCredentialsToken, createApiKey } from '../support/data_api.ts';
import type { TokenSet } from '../support/drill.ts';
import { basicCredentials, codeRequest, postCredentials, postForm, REDIRECT_URI, registerClient, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * The service keeps in memory what it needs of a request and drops the request itself. A value
 * read from a request is often V8's slice of the whole body; a cache keyed by it, or a metric
 * labelled with it, would keep the body, and with it the client secret, code, PKCE verifier or
 * refresh token it carried, for as long as the entry. So a heap snapshot of the running service,
 * as a crash dump or a debugging session would take one, is searched for every credential the
 * requests before it carried.
 */
describe('what the service keeps in memory of a request', function () {
  this.timeout(120_000);

  let server: TestServer;
  let dir: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oauth-heap-'));
    server = await startServer({ env: { NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${dir}` } });
  });

  after(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('a heap snapshot after sign-in, code exchanges, refreshes, revocation, introspection, userinfo and data API calls holds none of the credentials they carried', async () => {
    const user = await seedUser(server);
    const carried: Record<string, string> = { 'the password': user.password };
    const post = await registerClient(server.issuer, { client_name: 'Secret in the body', grant_types: ['authorization_code', 'refresh_token'] });
    const basic = await registerClient(server.issuer, {
      client_name: 'Secret in the header', grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'client_secret_basic',
    });
    for (const [client, how] of [[post, 'client_secret_post'], [basic, 'client_secret_basic']] as const) {
      Object.assign(carried, await useEveryEndpoint(server, user, client, how));
    }
    const machine = await clientCredentialsToken(server, user.workspaces[0]!.id);
    expect((await api(server, '/rest/companies', { credential: machine.access_token })).status).to.equal(200);
    carried['the workspace client\'s secret'] = machine.client.client_secret!;
    carried['its access token, used at the data API'] = machine.access_token;
    const apiKey = await createApiKey(server, user.workspaces[0]!.id);
    expect((await api(server, '/rest/companies', { credential: apiKey.key })).status).to.equal(200);
    carried['an API key, used at the data API'] = apiKey.key;

    const heap = await heapSnapshot(server, dir);
    expect(heap, 'the snapshot is of the service').to.include(server.issuer);
    expect(Object.entries(carried).filter(([, value]) => heap.includes(value)).map(([what]) => what)).to.deep.equal([]);
  });
});

/**
 * Signs the user in for the client, redeems the code, refreshes, revokes the new access token,
 * introspects and uses the first at userinfo, authenticating as `how` says; what each request carried.
 */
async function useEveryEndpoint(server: TestServer, user: SeededUser, client: RegisteredClient, how: 'client_secret_post' | 'client_secret_basic'): Promise<Record<string, string>> {
  const { url, verifier } = codeRequest(server.issuer, client.client_id);
  const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
  const code = callback.searchParams.get('code')!;
  const credentials = how === 'client_secret_post' ? postCredentials(client) : {};
  const headers = how === 'client_secret_basic' ? basicCredentials(client) : {};
  const first = await tokens(tokenRequest(server.issuer, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifier, ...credentials }, headers));
  const second = await tokens(tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: first.refresh_token, ...credentials }, headers));
  expect((await postForm(`${server.issuer}/oauth/revoke`, { token: second.access_token, ...credentials }, headers)).status).to.equal(200);
  const introspection = await postForm(`${server.issuer}/oauth/introspect`, { token: first.access_token, ...credentials }, headers);
  expect(await introspection.json()).to.include({ active: true });
  const userinfo = await fetch(`${server.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${first.access_token}` } });
  expect(userinfo.status).to.equal(200);
  const carried: Record<string, string> = {
    'the client secret': client.client_secret!,
    'the code': code,
    'the PKCE verifier': verifier,
    'the first refresh token (rotated out)': first.refresh_token,
    'the first access token (used at userinfo, introspected)': first.access_token,
    'the second access token (revoked)': second.access_token,
  };
  return Object.fromEntries(Object.entries(carried).map(([what, value]) => [`${how}: ${what}`, value]));
}

async function tokens(answer: Promise<Response>): Promise<TokenSet> {
  const response = await answer;
  expect(response.status, await response.clone().text()).to.equal(200);
  return response.json() as Promise<TokenSet>;
}

/** The text of a heap snapshot of the server (written on SIGUSR2 into `dir`), once it is whole. */
async function heapSnapshot(server: TestServer, dir: string): Promise<string> {
  process.kill(server.pid()!, 'SIGUSR2');
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(200)) {
    const file = (await readdir(dir)).find((name) => name.endsWith('.heapsnapshot'));
    if (!file) continue;
    const text = await readFile(join(dir, file), 'utf8');
    try {
      JSON.parse(text);
      return text;
    } catch {
      // Still being written.
    }
  }
  throw new Error('the server wrote no heap snapshot within a minute');
}
