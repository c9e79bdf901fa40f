import { randomBytes } from 'node:crypto';

import { expect } from 'chai';
import { decodeJwt } from 'jose';

import { openStore } from '../../adapters/index.ts';
import * as oauth from 'oauth4webapi';

import { REDIRECT_URI, codeRequest, exchangeCode, introspect, postCredentials, registerClient, tokenRequest } from '../support/oauth.ts';
import { startServer, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * The admin CLI (`node src/cli/admin.ts`), run as a real process against the same SQLite file as
 * the running server: what it creates is used through the server's real endpoints.
 */

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

interface WorkspaceJson {
  id: string;
  name: string;
}

interface ClientJson {
  client_id: string;
  client_name?: string;
  [key: string]: unknown;
}

const insecure = { [oauth.allowInsecureRequests]: true } as const;

/** A Node.js stack frame, e.g. "    at run (file:///.../admin.ts:12:3)". */
const STACK_FRAME = /^\s+at .+(:\d+:\d+\)?|\(node:.+\))$/m;

function uniqueEmail(label: string): string {
  return `${label}-${randomBytes(4).toString('hex')}@example.com`;
}

describe('admin CLI', function () {
  this.timeout(30_000);

  let server: TestServer;
  let as: oauth.AuthorizationServer;
  /** Every password handed to the CLI or typed at the login page, to look for in every output. */
  const passwords: string[] = [];
  /** Everything the CLI printed, over every run. */
  const outputs: string[] = [];

  async function admin(args: string[], stdin?: string): Promise<CliResult> {
    const result = await server.admin(args, stdin);
    outputs.push(result.stdout, result.stderr);
    return result;
  }

  /** A run that must fail: non-zero exit, a message on stderr, nothing on stdout, no stack trace. */
  async function failing(args: string[], stdin?: string): Promise<CliResult> {
    const result = await admin(args, stdin);
    expect(result.code, `exit code of ${args.join(' ')}\n${result.stderr}`).to.not.equal(0);
    expect(result.stdout, 'stdout').to.equal('');
    expect(result.stderr.trim(), 'stderr').to.not.equal('');
    expect(result.stderr, 'no stack trace').to.not.match(STACK_FRAME);
    return result;
  }

  async function createWorkspace(name: string): Promise<WorkspaceJson> {
    const result = await admin(['workspace', 'create', '--name', name, '--json']);
    expect(result.code, result.stderr).to.equal(0);
    return JSON.parse(result.stdout) as WorkspaceJson;
  }

  async function createUser(workspaceId: string, email: string, password: string, role = 'admin'): Promise<CliResult> {
    passwords.push(password);
    return admin(['user', 'create', '--email', email, '--name', 'Cli Person', '--workspace', workspaceId, '--role', role, '--password-stdin', '--json'], `${password}\n`);
  }

  async function listClients(): Promise<ClientJson[]> {
    const result = await admin(['client', 'list', '--json']);
    expect(result.code, result.stderr).to.equal(0);
    return JSON.parse(result.stdout) as ClientJson[];
  }

  before(async () => {
    server = await startServer();
    as = await oauth.processDiscoveryResponse(new URL(server.issuer), await oauth.discoveryRequest(new URL(server.issuer), insecure));
  });

  after(async () => {
    await server?.stop();
  });

  it('--help exits 0 and prints the usage', async () => {
    const result = await admin(['--help']);
    expect(result.code).to.equal(0);
    expect(result.stdout).to.match(/usage/i);
    for (const command of ['workspace create', 'workspace list', 'user create', 'iat create', 'client list', 'client delete', 'resource-server create']) {
      expect(result.stdout).to.contain(command);
    }
    expect(result.stdout).to.contain('--password-stdin');
  });

  it('an unknown command fails with a message naming it', async () => {
    const result = await failing(['frobnicate', 'now']);
    expect(result.stderr).to.contain('frobnicate');
    expect(result.stderr).to.match(/usage/i);
  });

  describe('workspaces', () => {
    it('workspace create --json prints the new workspace; workspace list --json includes it', async () => {
      const workspace = await createWorkspace('Initech');
      expect(workspace.id).to.be.a('string').and.not.equal('');
      expect(workspace.name).to.equal('Initech');

      const list = await admin(['workspace', 'list', '--json']);
      expect(list.code, list.stderr).to.equal(0);
      const workspaces = JSON.parse(list.stdout) as WorkspaceJson[];
      expect(workspaces.find(({ id }) => id === workspace.id)).to.deep.include({ id: workspace.id, name: 'Initech' });
    });

    it('workspace create without --name fails with a clear message', async () => {
      const result = await failing(['workspace', 'create', '--json']);
      expect(result.stderr).to.contain('--name');
    });
  });

  describe('users', () => {
    let workspace: WorkspaceJson;

    before(async () => {
      workspace = await createWorkspace('Hooli');
    });

    it('user create --password-stdin makes a user who can log in through the server and get a code and tokens', async () => {
      const email = uniqueEmail('admin');
      const password = `cli-${randomBytes(9).toString('base64url')}-secret`;
      const created = await createUser(workspace.id, email, password);
      expect(created.code, created.stderr).to.equal(0);
      const shown = JSON.parse(created.stdout) as { id: string; email: string; name: string; role: string; workspace_id: string };
      expect(shown.id).to.be.a('string').and.not.equal('');
      expect(shown).to.deep.include({ email, name: 'Cli Person', role: 'admin', workspace_id: workspace.id });
      expect(created.stdout + created.stderr).not.to.contain(password);
      expect(created.stdout).not.to.match(/password/i);

      const client = await registerClient(server.issuer, { client_name: 'CLI Login App' });
      const request = codeRequest(server.issuer, client.client_id);
      const callback = await authorize(new UserAgent(), request.url, server.origin, { email, password });
      expect(callback.origin + callback.pathname).to.equal(REDIRECT_URI);
      expect(callback.searchParams.get('error')).to.equal(null);
      expect(callback.searchParams.get('state')).to.equal(request.state);
      const code = callback.searchParams.get('code');
      expect(code).to.be.a('string').and.not.equal('');

      const response = await exchangeCode(server.issuer, client, code!, request.verifier);
      expect(response.status).to.equal(200);
      const tokens = await response.json() as { access_token: string };
      expect(decodeJwt(tokens.access_token)).to.deep.include({ sub: shown.id, workspace_id: workspace.id, role: 'admin' });
    });

    it('an invalid role fails with a clear message and leaves no user behind', async () => {
      const email = uniqueEmail('badrole');
      const result = await failing(['user', 'create', '--email', email, '--name', 'Bad Role', '--workspace', workspace.id, '--role', 'owner', '--password-stdin'], 'a-long-enough-password\n');
      expect(result.stderr).to.match(/role/i).and.to.contain('owner');
      expect(result.stderr).to.contain('admin').and.to.contain('member').and.to.contain('viewer');
      // Nothing half-made: the same email with a valid role now works.
      const retry = await createUser(workspace.id, email, 'a-long-enough-password');
      expect(retry.code, `retry after a refused role: ${retry.stderr}`).to.equal(0);
    });

    it('an unknown workspace fails with a clear message', async () => {
      const result = await failing(['user', 'create', '--email', uniqueEmail('nows'), '--name', 'No WS', '--workspace', 'ws_does_not_exist', '--role', 'member', '--password-stdin'], 'a-long-enough-password\n');
      expect(result.stderr).to.match(/workspace/i).and.to.contain('ws_does_not_exist');
    });

    it('a duplicate email (in another case) fails with a clear message', async () => {
      const email = uniqueEmail('dup');
      const first = await createUser(workspace.id, email, 'first-password-123');
      expect(first.code, first.stderr).to.equal(0);
      passwords.push('second-password-456');
      const result = await failing(['user', 'create', '--email', email.toUpperCase(), '--name', 'Dup', '--workspace', workspace.id, '--role', 'member', '--password-stdin'], 'second-password-456\n');
      expect(result.stderr).to.match(/already exists/i);
    });

    it('a short password fails with a clear message and is not echoed', async () => {
      passwords.push('shrt7');
      const result = await failing(['user', 'create', '--email', uniqueEmail('short'), '--name', 'Short', '--workspace', workspace.id, '--role', 'member', '--password-stdin'], 'shrt7\n');
      expect(result.stderr).to.match(/password/i).and.to.match(/8/);
      expect(result.stderr).not.to.contain('shrt7');
    });

    it('--password given as an argument is not accepted', async () => {
      const secret = 'argv-password-never-accepted';
      passwords.push(secret);
      const result = await failing(['user', 'create', '--email', uniqueEmail('argv'), '--name', 'Argv', '--workspace', workspace.id, '--role', 'member', '--password', secret]);
      expect(result.stderr).to.match(/unknown option/i).and.to.contain('--password');
      expect(result.stderr).not.to.contain(secret);
    });

    it('a missing required option of user create fails with a clear message', async () => {
      const result = await failing(['user', 'create', '--name', 'No Email', '--workspace', workspace.id, '--role', 'member', '--password-stdin'], 'a-long-enough-password\n');
      expect(result.stderr).to.contain('--email');
    });
  });

  describe('initial access tokens and clients', () => {
    let workspace: WorkspaceJson;
    let service: { client_id: string; client_secret: string; client_name: string };

    before(async () => {
      workspace = await createWorkspace('Vandelay');
    });

    it('iat create for an unknown workspace fails with a clear message', async () => {
      const result = await failing(['iat', 'create', '--workspace', 'ws_nowhere', '--json']);
      expect(result.stderr).to.match(/workspace/i).and.to.contain('ws_nowhere');
    });

    it('iat create --json prints a token that registers a client_credentials client for that workspace', async () => {
      const result = await admin(['iat', 'create', '--workspace', workspace.id, '--json']);
      expect(result.code, result.stderr).to.equal(0);
      const { initial_access_token: iat } = JSON.parse(result.stdout) as { initial_access_token: string };
      expect(iat).to.be.a('string').and.not.equal('');

      // An id beginning with "-" has its own test below; this one is about the ordinary case.
      let registered = await registerClient(server.issuer, { client_name: 'Vandelay Sync', grant_types: ['client_credentials'], redirect_uris: [] }, iat);
      for (let tries = 0; registered.client_id.startsWith('-') && tries < 20; tries += 1) {
        registered = await registerClient(server.issuer, { client_name: 'Vandelay Sync', grant_types: ['client_credentials'], redirect_uris: [] }, iat);
      }
      expect(registered.grant_types).to.deep.equal(['client_credentials']);
      service = { client_id: registered.client_id, client_secret: registered.client_secret!, client_name: 'Vandelay Sync' };

      const response = await oauth.clientCredentialsGrantRequest(as, { client_id: service.client_id }, oauth.ClientSecretPost(service.client_secret), { scope: 'api' }, insecure);
      const tokens = await oauth.processClientCredentialsResponse(as, { client_id: service.client_id }, response);
      expect(decodeJwt(tokens.access_token)).to.deep.include({ workspace_id: workspace.id, client_id: service.client_id });
    });

    it('client list --json shows the client and never a client_secret', async () => {
      const clients = await listClients();
      const listed = clients.find(({ client_id }) => client_id === service.client_id);
      expect(listed).to.deep.include({ client_id: service.client_id, client_name: 'Vandelay Sync' });
      for (const entry of clients) expect(entry).not.to.have.property('client_secret');

      const text = await admin(['client', 'list']);
      expect(text.code, text.stderr).to.equal(0);
      expect(text.stdout).to.contain(service.client_id);
      for (const output of [JSON.stringify(clients), text.stdout]) {
        expect(output).not.to.contain(service.client_secret);
        expect(output).not.to.match(/"?client_secret"?\s*[:=]/);
      }
    });

    it('client delete removes the client: gone from the list, 401 invalid_client at the token endpoint', async () => {
      const before = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', client_id: service.client_id, client_secret: service.client_secret });
      expect(before.status).to.equal(200);

      const result = await admin(['client', 'delete', service.client_id]);
      expect(result.code, result.stderr).to.equal(0);
      expect(result.stdout).to.contain(service.client_id);

      expect((await listClients()).map(({ client_id }) => client_id)).not.to.include(service.client_id);
      const after = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', client_id: service.client_id, client_secret: service.client_secret });
      expect(after.status).to.equal(401);
      expect((await after.json() as { error?: string }).error).to.equal('invalid_client');
    });

    it("client delete also ends the deleted client's access tokens (RFC 7592 section 2.3)", async () => {
      const iat = await admin(['iat', 'create', '--workspace', workspace.id, '--json']);
      expect(iat.code, iat.stderr).to.equal(0);
      const { initial_access_token: token } = JSON.parse(iat.stdout) as { initial_access_token: string };
      let doomed = await registerClient(server.issuer, { client_name: 'Doomed Sync', grant_types: ['client_credentials'], redirect_uris: [] }, token);
      for (let tries = 0; doomed.client_id.startsWith('-') && tries < 20; tries += 1) {
        doomed = await registerClient(server.issuer, { client_name: 'Doomed Sync', grant_types: ['client_credentials'], redirect_uris: [] }, token);
      }
      const issued = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', client_id: doomed.client_id, client_secret: doomed.client_secret! });
      expect(issued.status).to.equal(200);
      const { access_token: accessToken } = await issued.json() as { access_token: string };
      // A resource server the operator registered introspects it (a self-registered client may not: introspection_policy.test.ts).
      const created = await admin(['resource-server', 'create', '--name', 'Resource Server', '--auth-method', 'client_secret_post', '--json']);
      expect(created.code, created.stderr).to.equal(0);
      const resourceServer = JSON.parse(created.stdout) as { client_id: string; client_secret: string };
      const isActive = async () => (await introspect(server.issuer, postCredentials(resourceServer), accessToken)).active;
      expect(await isActive()).to.equal(true);

      const deleted = await admin(['client', 'delete', doomed.client_id]);
      expect(deleted.code, deleted.stderr).to.equal(0);
      expect(await isActive(), 'the deleted client\'s access token is still active').to.equal(false);
    });

    it('client ids never begin with "-", so they can be typed as CLI arguments', async () => {
      const clients = await Promise.all(Array.from({ length: 20 }, () => registerClient(server.issuer, { client_name: 'Id App' })));
      for (const { client_id } of clients) expect(client_id).to.match(/^cl_[A-Za-z0-9_-]+$/);
    });

    it('client delete takes an id beginning with "-" after --', async () => {
      const store = openStore(server.store);
      try {
        await store.model('Client').upsert('-legacy-id', { client_id: '-legacy-id', client_name: 'Legacy' }, undefined);
      } finally {
        await store.close();
      }
      const result = await admin(['client', 'delete', '--', '-legacy-id']);
      expect(result.code, result.stderr).to.equal(0);
      expect((await listClients()).map(({ client_id }) => client_id)).not.to.include('-legacy-id');
    });

    it('client delete of an unknown id fails with a clear message', async () => {
      const result = await failing(['client', 'delete', 'no-such-client-id']);
      expect(result.stderr).to.contain('no-such-client-id');
    });
  });

  describe('resource servers', () => {
    it('resource-server create prints the client secret once; the store keeps only its hash; client list shows the audience', async () => {
      const created = await admin(['resource-server', 'create', '--name', 'Billing API']);
      expect(created.code, created.stderr).to.equal(0);
      const [summary, secret] = created.stdout.trim().split('\n') as [string, string];
      const clientId = /created resource server (cl_[A-Za-z0-9_-]+)/.exec(summary)?.[1];
      expect(clientId, summary).to.be.a('string');
      expect(summary).to.contain(`${server.issuer}/rest`).and.to.contain('client_secret_basic');
      expect(secret).to.match(/^[A-Za-z0-9_-]{80,}$/);

      const store = openStore(server.store);
      try {
        const stored = await store.model('Client').find(clientId!);
        expect(stored?.client_secret).to.be.a('string').and.not.contain(secret);
        expect(JSON.stringify(stored)).not.to.contain(secret);
      } finally {
        await store.close();
      }
      const listed = (await listClients()).find(({ client_id }) => client_id === clientId);
      expect(listed).to.deep.include({ client_name: 'Billing API', token_endpoint_auth_method: 'client_secret_basic', introspection_audience: `${server.issuer}/rest` });
      expect(listed).not.to.have.property('client_secret');
      expect(listed!.grant_types).to.deep.equal([]);
    });

    it('resource-server create without --name, or with another --auth-method, fails with a clear message', async () => {
      expect((await failing(['resource-server', 'create'])).stderr).to.contain('--name');
      for (const method of ['none', 'private_key_jwt']) {
        expect((await failing(['resource-server', 'create', '--name', 'Gateway', '--auth-method', method])).stderr).to.contain('--auth-method');
      }
    });
  });

  // Mocha runs a suite's own tests before its nested suites: this suite comes last.
  describe('secrets', () => {
    it('no password ever appears in the CLI output or the server log', () => {
      expect(passwords.length).to.be.greaterThan(3);
      const cli = outputs.join('\n');
      const logs = server.logs();
      expect(logs).to.not.equal('');
      for (const password of passwords) {
        expect(cli, 'CLI output').not.to.contain(password);
        expect(logs, 'server log').not.to.contain(password);
      }
    });
  });
});
