import { expect } from 'chai';
import { decodeJwt } from 'jose';

import { api, createApiKey } from '../support/data_api.ts';
import { codeRequest, exchangeCode, introspect, postCredentials, tokenRequest, type RegisteredClient } from '../support/oauth.ts';
import { initialAccessToken, registerVettedClient, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { registerClient } from '../support/oauth.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * APIs an operator puts behind this server (RFC 8707): `admin resource-server create --resource`
 * registers one; its tokens name it in `aud`, carry only the scopes it accepts, are refused by
 * the data API and /mcp, and introspect for its own resource server; a refresh token reaches only
 * the APIs of its grant; deleting the API refuses its tokens everywhere by the time the command returns.
 */
describe('tokens for a registered API (resource indicators)', function () {
  this.timeout(60_000);

  const BILLING = 'https://billing.example/mcp';
  let server: TestServer;
  let user: SeededUser;
  let client: RegisteredClient;
  let billingServer: { client_id: string; client_secret: string };
  let dataApiServer: { client_id: string; client_secret: string };

  before(async () => {
    server = await startServer();
    user = await seedUser(server);
    client = await registerVettedClient(server, { client_name: 'Billing Agent' });
    const created = await server.admin(['resource-server', 'create', '--name', 'Billing MCP', '--resource', BILLING, '--scope', 'api', '--auth-method', 'client_secret_post', '--json']);
    expect(created.code, created.stderr).to.equal(0);
    billingServer = JSON.parse(created.stdout) as typeof billingServer;
    const forData = await server.admin(['resource-server', 'create', '--name', 'Data gateway', '--auth-method', 'client_secret_post', '--json']);
    expect(forData.code, forData.stderr).to.equal(0);
    dataApiServer = JSON.parse(forData.stdout) as typeof dataApiServer;
  });

  after(async () => {
    await server?.stop();
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.error(server.logs().split('\n').slice(-30).join('\n'));
  });

  /** Signs the user in and allows; returns the code, the verifier and the consent page's HTML. */
  async function allow(resources: string[], scope = 'api profile'): Promise<{ code: string; verifier: string; consent: string }> {
    const request = codeRequest(server.issuer, client.client_id, { scope });
    const url = new URL(request.url);
    for (const resource of resources) url.searchParams.append('resource', resource);
    let consent = '';
    const callback = await authorize(new UserAgent(), url.href, server.origin, { ...user, onConsent: (html) => { consent = html; } });
    const code = callback.searchParams.get('code');
    expect(code, callback.href).to.be.a('string');
    return { code: code!, verifier: request.verifier, consent };
  }

  async function tokens(response: Response): Promise<{ access_token: string; refresh_token: string; scope: string }> {
    expect(response.status, await response.clone().text()).to.equal(200);
    return response.json() as Promise<{ access_token: string; refresh_token: string; scope: string }>;
  }

  async function expectInvalidTarget(response: Response): Promise<string> {
    expect(response.status).to.equal(400);
    const body = await response.json() as { error: string; error_description: string };
    expect(body.error).to.equal('invalid_target');
    return body.error_description;
  }

  const refresh = (refreshToken: string, resource?: string) => tokenRequest(server.issuer, {
    grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client), ...(resource ? { resource } : {}),
  });

  it('lists the APIs: the two served here and the registered one, with what each accepts and who introspects it', async () => {
    const listed = await server.admin(['resource-server', 'list', '--json']);
    expect(listed.code, listed.stderr).to.equal(0);
    const apis = JSON.parse(listed.stdout) as Array<{ resource: string; scopes: string[]; built_in: boolean; introspection_clients: string[] }>;
    expect(apis.map(({ resource }) => resource)).to.deep.equal([`${server.issuer}/rest`, `${server.issuer}/mcp`, BILLING]);
    expect(apis[2]).to.deep.include({ scopes: ['api'], built_in: false, introspection_clients: [billingServer.client_id] });
    expect(apis[0]!.introspection_clients).to.include(dataApiServer.client_id);
  });

  it('refuses to register an API that is not a canonical https URI, is already known, or wants a scope of its own', async () => {
    const refusals: Array<[string[], string]> = [
      [['--resource', 'http://billing.example/mcp'], 'https'],
      [['--resource', 'https://billing.example/mcp#tools'], 'fragment'],
      [['--resource', 'billing'], 'absolute'],
      [['--resource', BILLING], 'already'],
      [['--resource', `${server.issuer}/mcp`], 'already'],
      [['--resource', 'https://crm.example/api', '--scope', 'admin'], 'admin'],
    ];
    for (const [args, message] of refusals) {
      const result = await server.admin(['resource-server', 'create', '--name', 'Refused', ...args]);
      expect(result.code, args.join(' ')).to.not.equal(0);
      expect(result.stderr, args.join(' ')).to.contain(message);
    }
    const listed = JSON.parse((await server.admin(['resource-server', 'list', '--json'])).stdout) as unknown[];
    expect(listed, 'nothing half-made').to.have.length(3);
  });

  it('names no API on the consent page for a request that asks none of its scopes (openid and profile only)', async () => {
    const { consent } = await allow([], 'openid profile');
    expect(consent).to.contain('It will be able to:');
    expect(consent).not.to.contain('It will reach');
  });

  it('names the API on the consent page, and its token has its aud and only the scopes it accepts', async () => {
    const { code, verifier, consent } = await allow([BILLING]);
    expect(consent).to.contain('It will reach <strong>Billing MCP</strong> at billing.example');
    const issued = await tokens(await exchangeCode(server.issuer, client, code, verifier));
    const claims = decodeJwt(issued.access_token);
    expect(claims.aud).to.equal(BILLING);
    expect(claims.scope).to.equal('api');
    expect(claims.workspace_id).to.equal(user.workspaces[0]!.id);
  });

  it('the registered API\'s token is refused by the data API and /mcp, and introspects only for its own resource server', async () => {
    const { code, verifier } = await allow([BILLING]);
    const { access_token: token } = await tokens(await exchangeCode(server.issuer, client, code, verifier));
    for (const path of ['/rest/companies', '/rest/metadata/objects']) {
      const refused = await api(server, path, { credential: token });
      expect(refused.status, path).to.equal(401);
      expect(refused.headers.get('www-authenticate')).to.contain('error="invalid_token"');
    }
    const mcp = await fetch(`${server.issuer}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(mcp.status).to.equal(401);

    const forBilling = await introspect(server.issuer, postCredentials(billingServer), token);
    expect(forBilling).to.deep.include({ active: true, aud: BILLING, scope: 'api', client_id: client.client_id });
    expect(await introspect(server.issuer, postCredentials(dataApiServer), token)).to.deep.equal({ active: false });
  });

  it('a refresh token reaches only the APIs of its grant; naming another is refused before the token is used up', async () => {
    const { code, verifier } = await allow([BILLING]);
    const first = await tokens(await exchangeCode(server.issuer, client, code, verifier));
    const description = await expectInvalidTarget(await refresh(first.refresh_token, `${server.issuer}/rest`));
    expect(description).to.contain('grant does not include');
    const again = await tokens(await refresh(first.refresh_token));
    expect(decodeJwt(again.access_token).aud, 'the refresh token still worked').to.equal(BILLING);
  });

  it('a grant for two APIs gets a token for each, the data API by default', async () => {
    const { code, verifier, consent } = await allow([`${server.issuer}/rest`, BILLING]);
    expect(consent).to.contain('Billing MCP').and.to.contain('workspace data API');
    const first = await tokens(await exchangeCode(server.issuer, client, code, verifier));
    expect(decodeJwt(first.access_token).aud).to.equal(`${server.issuer}/rest`);
    expect(decodeJwt(first.access_token).scope).to.equal('api profile');
    const billing = await tokens(await refresh(first.refresh_token, BILLING));
    expect(decodeJwt(billing.access_token)).to.deep.include({ aud: BILLING, scope: 'api' });
    const data = await tokens(await refresh(billing.refresh_token, `${server.issuer}/rest`));
    expect((await api(server, '/rest/companies', { credential: data.access_token })).status).to.equal(200);
  });

  it('an API nobody registered is refused at the authorization endpoint and before a code is used up', async () => {
    const request = codeRequest(server.issuer, client.client_id, { resource: 'https://unknown.example/api' });
    const refused = await authorize(new UserAgent(), request.url, server.origin, user);
    expect(refused.searchParams.get('error')).to.equal('invalid_target');
    const { code, verifier } = await allow([BILLING]);
    await expectInvalidTarget(await exchangeCode(server.issuer, client, code, verifier, { resource: 'https://unknown.example/api' }));
    await tokens(await exchangeCode(server.issuer, client, code, verifier));
  });

  it('client credentials get a token for a registered API', async () => {
    const machine = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, user.workspaces[0]!.id));
    const issued = await tokens(await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', resource: BILLING, ...postCredentials(machine) }));
    expect(decodeJwt(issued.access_token).aud).to.equal(BILLING);
    await expectInvalidTarget(await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', resource: 'https://unknown.example/api', ...postCredentials(machine) }));
  });

  it('takes an API named with an upper-case scheme or host for the registered one; the path is still compared exactly', async () => {
    const shouted = 'HTTPS://BILLING.EXAMPLE/mcp';
    const { code, verifier, consent } = await allow([shouted]);
    expect(consent).to.contain('<strong>Billing MCP</strong> at billing.example');
    const first = await tokens(await exchangeCode(server.issuer, client, code, verifier, { resource: shouted }));
    expect(decodeJwt(first.access_token)).to.deep.include({ aud: BILLING, scope: 'api' });
    const again = await tokens(await refresh(first.refresh_token, shouted));
    expect(decodeJwt(again.access_token).aud).to.equal(BILLING);
    await expectInvalidTarget(await refresh(again.refresh_token, 'https://billing.example/MCP'));

    const machine = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, user.workspaces[0]!.id));
    const mcp = `${server.issuer.toUpperCase()}/mcp`;
    const issued = await tokens(await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', resource: mcp, ...postCredentials(machine) }));
    expect(decodeJwt(issued.access_token).aud).to.equal(`${server.issuer}/mcp`);

    const duplicate = await server.admin(['resource-server', 'create', '--name', 'Billing again', '--resource', 'https://Billing.Example/mcp']);
    expect(duplicate.code).to.not.equal(0);
    expect(duplicate.stderr).to.contain('already');
  });

  it('takes an API registered or asked for with its scheme\'s default port, or with an empty path, as new URL() spells it', async () => {
    const machine = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, user.workspaces[0]!.id));
    const audienceFor = async (resource: string) => decodeJwt((await tokens(await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', resource, ...postCredentials(machine) }))).access_token).aud;
    for (const [registered, asked, canonical] of [
      ['https://ported.example:443/v1', 'https://ported.example/v1', 'https://ported.example/v1'],
      ['https://origin.example', 'https://origin.example/', 'https://origin.example/'],
    ]) {
      const created = await server.admin(['resource-server', 'create', '--name', `API at ${registered}`, '--resource', registered!, '--json']);
      expect(created.code, created.stderr).to.equal(0);
      expect((JSON.parse(created.stdout) as { resource: string }).resource, 'stored as new URL() writes it').to.equal(canonical);
      expect(await audienceFor(asked!), asked).to.equal(canonical);
      expect(await audienceFor(registered!), `${registered}, as registered`).to.equal(canonical);
    }
  });

  // Last: it deletes the API the tests above use.
  it('deleting the API refuses its tokens by the time the command returns; other tokens and API keys go on working, and so do tokens for it once it is registered again', async () => {
    const { code, verifier } = await allow([`${server.issuer}/rest`, BILLING]);
    const data = await tokens(await exchangeCode(server.issuer, client, code, verifier));
    const billing = await tokens(await refresh(data.refresh_token, BILLING));
    const key = await createApiKey(server, user.workspaces[0]!.id);
    expect(await introspect(server.issuer, postCredentials(client), billing.access_token)).to.include({ active: true });

    const deleted = await server.admin(['resource-server', 'delete', BILLING]);
    expect(deleted.code, deleted.stderr).to.equal(0);
    expect(deleted.stdout).to.contain(billingServer.client_id);

    expect(await introspect(server.issuer, postCredentials(client), billing.access_token)).to.deep.equal({ active: false });
    await expectInvalidTarget(await refresh(billing.refresh_token, BILLING));
    const next = await tokens(await refresh(billing.refresh_token, `${server.issuer}/rest`));
    expect((await api(server, '/rest/companies', { credential: next.access_token })).status, 'the grant\'s data API token').to.equal(200);
    expect((await api(server, '/rest/companies', { credential: key.key })).status).to.equal(200);
    const listed = JSON.parse((await server.admin(['resource-server', 'list', '--json'])).stdout) as Array<{ resource: string }>;
    expect(listed.map(({ resource }) => resource)).to.not.include(BILLING);
    const again = await server.admin(['resource-server', 'delete', BILLING]);
    expect(again.code).to.not.equal(0);
    expect(again.stderr).to.contain('no API registered');

    const recreated = await server.admin(['resource-server', 'create', '--name', 'Billing MCP', '--resource', BILLING, '--scope', 'api', '--auth-method', 'client_secret_post', '--json']);
    expect(recreated.code, recreated.stderr).to.equal(0);
    const newServer = JSON.parse(recreated.stdout) as typeof billingServer;
    const machine = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, user.workspaces[0]!.id));
    const fresh = await tokens(await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', resource: BILLING, ...postCredentials(machine) }));
    expect(await introspect(server.issuer, postCredentials(newServer), fresh.access_token), 'a token for the API registered again').to.include({ active: true, aud: BILLING });
    expect(await introspect(server.issuer, postCredentials(newServer), billing.access_token), 'one from before the deletion').to.deep.equal({ active: false });
  });
});
