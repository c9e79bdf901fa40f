import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { expect } from 'chai';
import { decodeJwt } from 'jose';
import type { Browser } from 'playwright-core';

import { captureRedirect, launchBrowser, newPage, signIn } from '../support/browser.ts';
import { startDocumentServer, type DocumentServer } from '../support/document_server.ts';
import { McpHostProvider } from '../support/mcp_host.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { freePort, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { testCertificates, type TestCertificates } from '../support/tls.ts';

/**
 * A stock MCP client (@modelcontextprotocol/sdk) against `/mcp`, given nothing but its URL: the
 * 401's challenge, the protected resource metadata (RFC 9728), the server's metadata (RFC 8414),
 * then its Client ID Metadata Document (an https URL as client_id, served by the test with a
 * throwaway CA the service was given) or dynamic registration; the user signs in and allows in
 * Chromium, the consent page naming the document's host; the tools are listed and called; the
 * token is refreshed without the user.
 */

interface ToolText {
  content: Array<{ type: string; text?: string }>;
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
}

describe('an MCP host (@modelcontextprotocol/sdk) reaching /mcp with a Client ID Metadata Document', function () {
  this.timeout(90_000);

  let certificates: TestCertificates;
  let documents: DocumentServer;
  let browser: Browser;

  before(async () => {
    certificates = await testCertificates();
    documents = await startDocumentServer(certificates);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await documents?.stop();
    await certificates?.remove();
  });

  /** The service, trusting the test's CA and its document server on loopback. */
  function serviceEnv(): Record<string, string> {
    return { NODE_EXTRA_CA_CERTS: certificates.caFile, CIMD_TRUSTED_HOSTS: `localhost:${documents.port}` };
  }

  /** The document at `path`, for a host with this redirect URI. */
  function publishDocument(path: string, redirectUrl: string, clientName = 'Test MCP host'): string {
    const clientId = `${documents.origin}${path}`;
    documents.serve(path, {
      client_id: clientId,
      client_name: clientName,
      redirect_uris: [redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }, { 'cache-control': 'max-age=3600' });
    return clientId;
  }

  /**
   * The host's first connection: 401, `auth()` sends the user to the authorization URL, the user
   * signs in and allows in Chromium, the host finishes with the code and connects again.
   */
  async function connectAs(server: TestServer, user: SeededUser, provider: McpHostProvider): Promise<{ client: Client; consentText: string }> {
    const mcpUrl = new URL(`${server.issuer}/mcp`);
    const first = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
    const client = new Client({ name: 'test-host', version: '1.0.0' });
    let refused: unknown;
    try {
      await client.connect(first);
    } catch (error) {
      refused = error;
    }
    expect(refused, 'the first connection needs authorization').to.be.instanceOf(UnauthorizedError);
    const authorizationUrl = provider.redirects.at(-1)!;
    expect(authorizationUrl.searchParams.get('resource')).to.equal(mcpUrl.href);

    const { context, page } = await newPage(browser);
    try {
      const capture = await captureRedirect(page, provider.redirectUrl);
      await page.goto(authorizationUrl.href);
      await signIn(page, user);
      await page.getByRole('button', { name: 'Allow' }).waitFor();
      const consentText = await page.locator('main').innerText();
      await page.getByRole('button', { name: 'Allow' }).click();
      const callback = await capture.next();
      const code = callback.url.searchParams.get('code');
      expect(code, callback.url.href).to.be.a('string');
      await first.finishAuth(code!);
      const connected = new Client({ name: 'test-host', version: '1.0.0' });
      await connected.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
      return { client: connected, consentText };
    } finally {
      await context.close();
    }
  }

  describe('on one instance', () => {
    let server: TestServer;
    let user: SeededUser;

    before(async () => {
      server = await startServer({ env: serviceEnv() });
      user = await seedUser(server, [{ workspace: 'Acme', role: 'member' }]);
    });

    after(async () => {
      await server?.stop();
    });

    afterEach(function () {
      if (this.currentTest?.state === 'failed') console.error(server.logs().split('\n').slice(-40).join('\n'));
    });

    it('discovers the server from /mcp, identifies itself by its document, shows its host on the consent page, calls the tools and refreshes', async () => {
      const redirectUrl = `http://127.0.0.1:${await freePort()}/callback`;
      const clientId = publishDocument('/clients/host.json', redirectUrl);
      const metadata = await (await fetch(`${server.issuer}/.well-known/oauth-authorization-server`)).json() as Record<string, unknown>;
      expect(metadata.client_id_metadata_document_supported).to.equal(true);

      const provider = new McpHostProvider(redirectUrl, { clientMetadataUrl: clientId });
      const { client, consentText } = await connectAs(server, user, provider);
      expect(provider.clientInformation()?.client_id, 'no registration: the document is the client').to.equal(clientId);
      expect(consentText).to.include(`localhost:${documents.port}`);
      expect(consentText).to.include('No administrator has checked it');
      expect(consentText).to.include('127.0.0.1');

      const claims = decodeJwt(provider.tokens()!.access_token);
      expect(claims.aud).to.equal(`${server.issuer}/mcp`);
      expect(claims.client_id).to.equal(clientId);

      const tools = await client.listTools();
      expect(tools.tools.map((tool) => tool.name).sort()).to.deep.equal(['create_record', 'delete_record', 'describe_objects', 'get_record', 'list_records', 'update_record']);
      const created = await client.callTool({ name: 'create_record', arguments: { object: 'companies', fields: { name: 'Made over MCP', employees: 3 } } }) as ToolText;
      expect(created.isError ?? false, JSON.stringify(created)).to.equal(false);
      const id = (created.structuredContent as { data: { company: { id: string } } }).data.company.id;
      const listed = await client.callTool({ name: 'list_records', arguments: { object: 'companies' } }) as ToolText;
      expect(JSON.stringify(listed.structuredContent)).to.include(id);
      await client.close();

      // The access token has expired: the host refreshes it without the user.
      const refreshToken = provider.tokens()!.refresh_token;
      provider.expireAccessToken();
      expect(await auth(provider, { serverUrl: new URL(`${server.issuer}/mcp`) })).to.equal('AUTHORIZED');
      expect(provider.tokens()!.refresh_token).to.not.equal(refreshToken);
      const again = new Client({ name: 'test-host', version: '1.0.0' });
      await again.connect(new StreamableHTTPClientTransport(new URL(`${server.issuer}/mcp`), { authProvider: provider }));
      const got = await again.callTool({ name: 'get_record', arguments: { object: 'companies', id } }) as ToolText;
      expect(JSON.stringify(got.structuredContent)).to.include('Made over MCP');
      await again.close();
    });

    it('lists its grant in the settings area under the document\'s host, and revoking it there stops its token at /mcp', async () => {
      const redirectUrl = `http://127.0.0.1:${await freePort()}/callback`;
      const clientId = publishDocument('/clients/settings-host.json', redirectUrl, 'Settings Test Host');
      const provider = new McpHostProvider(redirectUrl, { clientMetadataUrl: clientId });
      const { client } = await connectAs(server, user, provider);
      await client.close();
      const listTools = () => fetch(`${server.issuer}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${provider.tokens()!.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect((await listTools()).status).to.equal(200);

      const { context, page } = await newPage(browser);
      try {
        await page.goto(`${server.issuer}/settings`);
        await signIn(page, user);
        const name = `Settings Test Host, at localhost:${documents.port}`;
        const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { level: 3, name, exact: true }) });
        await card.waitFor();
        await card.getByRole('link', { name: /^Revoke access/ }).click();
        await page.getByRole('heading', { level: 1, name: `Revoke access of ${name}?` }).waitFor();
        await page.getByRole('button', { name: 'Revoke access', exact: true }).click();
        await page.getByRole('status').waitFor();
        expect(await page.getByRole('status').innerText()).to.include('Access revoked');
      } finally {
        await context.close();
      }
      expect((await listTools()).status, 'the revoked grant\'s token').to.equal(401);
    });

    it('works the same through dynamic registration when the host has no document', async () => {
      const redirectUrl = `http://127.0.0.1:${await freePort()}/callback`;
      const provider = new McpHostProvider(redirectUrl);
      const { client, consentText } = await connectAs(server, user, provider);
      expect(provider.clientInformation()?.client_id).to.match(/^cl_/);
      expect(consentText).to.include('registered itself');
      const described = await client.callTool({ name: 'describe_objects', arguments: {} }) as ToolText;
      expect(JSON.stringify(described.structuredContent)).to.include('companies');
      await client.close();
    });
  });

  describe('on two instances sharing Redis', () => {
    let redis: RedisServer;
    let first: TestServer;
    let second: TestServer;
    let user: SeededUser;

    before(async () => {
      redis = await startRedis();
      const env = { ...serviceEnv(), KEY_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64url') };
      first = await startServer({ store: redis.url, env });
      // One issuer behind a load balancer: the second instance is reached on its own port.
      second = await startServer({ store: redis.url, env: { ...env, BASE_URL: first.issuer } });
      user = await seedUser(first, [{ workspace: 'Acme', role: 'member' }]);
    });

    after(async () => {
      await first?.stop();
      await second?.stop();
      await redis?.stop();
    });

    it('fetches the document once for both, and a token from one works at the other', async () => {
      const redirectUrl = `http://127.0.0.1:${await freePort()}/callback`;
      const path = '/clients/shared.json';
      const clientId = publishDocument(path, redirectUrl);
      const provider = new McpHostProvider(redirectUrl, { clientMetadataUrl: clientId });
      const { client } = await connectAs(first, user, provider);
      await client.close();
      // The second instance is sent the same client_id: it reads the document the first stored.
      const landing = await fetch(`${second.origin}/oauth/authorize?${new URLSearchParams({
        client_id: clientId, response_type: 'code', redirect_uri: redirectUrl, scope: 'api', state: 'x',
        code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeKt8URWbuGJSstw-cM0', code_challenge_method: 'S256', resource: `${first.issuer}/mcp`,
      })}`, { redirect: 'manual' });
      expect(landing.status, await landing.clone().text()).to.be.oneOf([302, 303]);
      expect(documents.requests(path), 'the document was fetched once').to.equal(1);
      const viaSecond = new Client({ name: 'test-host', version: '1.0.0' });
      await viaSecond.connect(new StreamableHTTPClientTransport(new URL(`${second.origin}/mcp`), { authProvider: provider }));
      expect((await viaSecond.listTools()).tools).to.have.length(6);
      await viaSecond.close();
    });
  });
});
