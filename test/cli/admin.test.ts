import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

import { expect } from 'chai';
import { decodeJwt } from 'jose';

import { openStore } from '../../adapters/index.ts';
import * as oauth from 'oauth4webapi';

import { Accounts } from '../../src/accounts/accounts.ts';
import { hashPassword } from '../../src/accounts/passwords.ts';
import { INVITATION_MODEL, invitationsOver } from '../../src/settings/invitations.ts';
import { PROPAGATION_BOUND_MS } from '../../src/shared/propagation.ts';
import { api, clientCredentialsToken, createApiKey } from '../support/data_api.ts';
import {
  REDIRECT_URI, codeRequest, exchangeCode, introspect, postCredentials, register, registerClient, tokenRequest, type RegisteredClient,
} from '../support/oauth.ts';
import { freePort, initialAccessToken, registerVettedClient, runAdmin, startServer, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { redisCli, startRedis } from '../support/redis.ts';
import { eventually } from '../support/wait.ts';

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

/**
 * Every command's --json output names its fields one way, snake_case as OAuth does, and gives
 * every time (a field ending in `_at`, a key's `signs_from` and `signs_until`) in ISO 8601:
 * checked on every output the tests below print.
 */
function expectJsonManners(command: string, value: unknown, path = ''): void {
  if (Array.isArray(value)) value.forEach((item, i) => expectJsonManners(command, item, `${path}[${i}]`));
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
  for (const [name, field] of Object.entries(value)) {
    expect(name, `${command}: ${path}.${name}`).to.match(/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/);
    if (/_at$|^signs_(from|until)$/.test(name) && field !== null) {
      expect(field, `${command}: ${path}.${name}`).to.be.a('string').and.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    }
    expectJsonManners(command, field, `${path}.${name}`);
  }
}

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

  async function admin(args: string[], stdin?: string | Buffer): Promise<CliResult> {
    const result = await server.admin(args, stdin);
    outputs.push(result.stdout, result.stderr);
    if (result.code === 0 && args.includes('--json')) expectJsonManners(args.slice(0, 2).join(' '), JSON.parse(result.stdout));
    return result;
  }

  /** A run that must succeed with --json: what it printed. */
  async function adminJson<T>(args: string[], stdin?: string): Promise<T> {
    const result = await admin([...args, '--json'], stdin);
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
    return JSON.parse(result.stdout) as T;
  }

  /** A refusal: exit 1, one line `error: ...` on stderr. */
  async function refused(args: string[], stdin?: string | Buffer): Promise<string> {
    const result = await failing(args, stdin);
    expect(result.code, result.stderr).to.equal(1);
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines, result.stderr).to.have.length(1);
    expect(lines[0]).to.match(/^error: /);
    return lines[0]!;
  }

  /** A run that must fail: non-zero exit, a message on stderr, nothing on stdout, no stack trace. */
  async function failing(args: string[], stdin?: string | Buffer): Promise<CliResult> {
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

  it('--help exits 0 and prints the usage of every command', async () => {
    const result = await admin(['--help']);
    expect(result.code).to.equal(0);
    expect(result.stdout).to.match(/usage/i);
    for (const command of [
      'quickstart', 'workspace create', 'workspace list', 'workspace delete', 'user create', 'user list', 'user set-password', 'user delete',
      'member add', 'member set-role', 'member remove', 'iat create', 'client list', 'client delete', 'resource-server create',
      'resource-server list', 'resource-server delete', 'api-key create', 'api-key list', 'api-key revoke', 'keys rotate', 'keys list',
    ]) {
      expect(result.stdout).to.contain(`  ${command}`);
    }
    expect(result.stdout).to.contain('--password-stdin');
  });

  it('help [command] prints what --help does', async () => {
    for (const [asked, same] of [[['help'], ['--help']], [['help', 'user', 'delete'], ['user', 'delete', '--help']]] as const) {
      const answer = await admin([...asked]);
      expect(answer.code, answer.stderr).to.equal(0);
      expect(answer.stdout).to.equal((await admin([...same])).stdout);
    }
  });

  it('<command> --help prints that command\'s usage only, and <group> --help its group\'s', async () => {
    const command = await admin(['user', 'delete', '--help']);
    expect(command.code, command.stderr).to.equal(0);
    expect(command.stdout).to.match(/^Usage: npm run admin -- user delete /);
    expect(command.stdout).to.contain('--email EMAIL').and.to.contain('last admin');
    for (const other of ['user create', 'user list', 'workspace create', 'member add']) expect(command.stdout).not.to.contain(other);

    const group = await admin(['member', '--help']);
    expect(group.code, group.stderr).to.equal(0);
    for (const name of ['member add', 'member set-role', 'member remove']) expect(group.stdout).to.contain(name);
    for (const other of ['user create', 'workspace delete']) expect(group.stdout).not.to.contain(other);

    // With the options a run would take, too.
    const withOptions = await admin(['api-key', 'create', '--workspace', 'ws_x', '--help']);
    expect(withOptions.code).to.equal(0);
    expect(withOptions.stdout).to.contain('api-key create').and.not.to.contain('api-key list');
  });

  it('a command called wrongly fails (exit 2) with one error line and one line pointing to its --help, never the whole usage', async function () {
    this.timeout(90_000);
    const cases: Array<[string[], RegExp, string]> = [
      [['user', 'delete', '--role', 'admin'], /user delete does not take --role/, 'user delete'],
      [['user', 'delete'], /--email/, 'user delete'],
      [['member', 'remove', '--workspace', 'ws_x', '--email', 'a@example.com', '--bogus'], /unknown option --bogus/, 'member remove'],
      [['workspace', 'delete', 'extra', '--workspace', 'ws_x'], /unexpected argument "extra"/, 'workspace delete'],
      [['user'], /"user" needs one of: create, list, set-password, delete/, 'user'],
      [['frobnicate', 'now'], /unknown command "frobnicate now"/, ''],
      [['workspace', 'create', '--name', 'Acme', '--name=Initrode'], /--name given twice/, 'workspace create'],
      [['member', 'add', '--workspace', 'ws_x', '--email', 'a@example.com', '--role', 'owner'], /--role must be one of admin, member, viewer, got "owner"/, 'member add'],
      [['user', 'create', '--email', 'a@example.com', '--name', 'A', '--workspace', 'ws_x', '--role', 'boss', '--password-stdin'], /--role must be one of/, 'user create'],
    ];
    for (const [args, message, help] of cases) {
      const result = await failing(args);
      expect(result.code, args.join(' ')).to.equal(2);
      const lines = result.stderr.trimEnd().split('\n');
      expect(lines, result.stderr).to.have.length(2);
      expect(lines[0]).to.match(/^error: /).and.to.match(message);
      expect(lines[1]).to.equal(`Run "npm run admin --${help ? ` ${help}` : ''} --help" for usage.`);
    }
  });

  it('with --json, says a failure as one JSON object a script can parse (error, message) on stderr, nothing on stdout, with the exit code it has without', async function () {
    this.timeout(90_000);
    const missingStore = join(tmpdir(), `no-store-${randomBytes(4).toString('hex')}`, 'oauth.sqlite');
    const unreachable = { ...server.env, STORE: `redis://127.0.0.1:${await freePort()}`, KEY_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64url') };
    const cases: Array<{ env?: Record<string, string>; args: string[]; code: number; error: string; message: RegExp; usage?: string }> = [
      { args: ['user', 'delete', '--role', 'admin'], code: 2, error: 'usage_error', message: /^user delete does not take --role$/, usage: 'npm run admin -- user delete --help' },
      { args: ['member', 'remove', '--bogus'], code: 2, error: 'usage_error', message: /^unknown option --bogus$/, usage: 'npm run admin -- member remove --help' },
      { args: ['frobnicate'], code: 2, error: 'usage_error', message: /^unknown command "frobnicate"$/, usage: 'npm run admin -- --help' },
      { args: ['iat', 'create', '--workspace', 'ws_nowhere'], code: 1, error: 'refused', message: /ws_nowhere/ },
      { env: { ...server.env, STORE: `sqlite:${missingStore}` }, args: ['workspace', 'list'], code: 1, error: 'configuration_error', message: /^STORE: there is no SQLite store at / },
      { env: { ...server.env, PORT: 'abc' }, args: ['workspace', 'list'], code: 1, error: 'configuration_error', message: /^PORT / },
      { env: { ...server.env, KEY_ENCRYPTION_KEY: Buffer.alloc(32, 5).toString('base64url') }, args: ['resource-server', 'list'], code: 1, error: 'configuration_error', message: /key-encryption key/ },
      { env: unreachable, args: ['workspace', 'list'], code: 1, error: 'store_unavailable', message: /^the store did not answer: Redis is not reachable/ },
    ];
    for (const { env, args, code, error, message, usage } of cases) {
      const called = [...args, '--json'].join(' ');
      const result = env ? await runAdmin(env, [...args, '--json']) : await admin([...args, '--json']);
      outputs.push(result.stdout, result.stderr);
      expect([result.code, result.stdout], `${called}: ${result.stderr}`).to.deep.equal([code, '']);
      const lines = result.stderr.trimEnd().split('\n');
      expect(lines, `${called}: one line`).to.have.length(1);
      const said = JSON.parse(lines[0]!) as Record<string, unknown>;
      expect(Object.keys(said).sort(), called).to.deep.equal(usage ? ['error', 'message', 'usage'] : ['error', 'message']);
      expect(said, called).to.include({ error, ...(usage ? { usage } : {}) });
      expect(said.message, called).to.be.a('string').and.match(message);
      expectJsonManners(called, said);
    }
  });

  it('says how to give a value that starts with a dash, which reads as an option (exit 2), rather than that it is ambiguous', async () => {
    const result = await failing(['api-key', 'create', '--workspace', 'ws_x', '--name', 'CI', '--expires-in', '-1']);
    expect(result.code).to.equal(2);
    expect(result.stderr.trimEnd().split('\n')[0]).to.equal('error: --expires-in is followed by "-1", which reads as an option; if it is the value, write --expires-in=-1');
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

    it('a name holding a character that shows nothing is refused: it would look like another name, or like no name at all', async () => {
      const before = await adminJson<WorkspaceJson[]>(['workspace', 'list']);
      for (const name of ['Ac\u200Bme', '\u200B', 'Acme\uFEFF', 'In\u00ADitech', '\u3164']) {
        expect(await refused(['workspace', 'create', '--name', name]), JSON.stringify(name)).to.contain('invisible character');
      }
      expect(await adminJson<WorkspaceJson[]>(['workspace', 'list'])).to.deep.equal(before);
      // The joiners Persian, the Indic scripts and emoji sequences need are names' own.
      for (const name of ['\u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645', 'Team \u{1F469}\u200D\u{1F4BB}']) {
        expect((await createWorkspace(name)).name).to.equal(name);
      }
    });

    it('a name stacking dozens of combining marks on a letter is refused; the accents real scripts stack are names\' own', async () => {
      expect(await refused(['workspace', 'create', '--name', `Acme${'\u0301'.repeat(20)}`])).to.contain('cannot stack more than 6 accents or other combining marks');
      const vietnamese = 'Vi\u1EC7t Nam'.normalize('NFD');
      expect((await createWorkspace(vietnamese)).name).to.equal(vietnamese);
    });

    it('workspace create without --name fails with a clear message', async () => {
      const result = await failing(['workspace', 'create', '--json']);
      expect(result.stderr).to.contain('--name');
    });

    it('a name with a line break or another control character is refused, and nothing is written: it would break the lines of workspace list and user list', async () => {
      const before = await adminJson<WorkspaceJson[]>(['workspace', 'list']);
      for (const name of ['Acme\nws_fake  Fake workspace', 'Tab\tbed', 'Bell\u0007', 'Line\u2028separator', 'Paragraph\u2029separator']) {
        expect(await refused(['workspace', 'create', '--name', name]), JSON.stringify(name)).to.contain('control character');
      }
      // One that would show another name reversed on the consent page (Acme Corp, read backwards).
      for (const name of ['\u202Eproc emcA', 'Acme\u2066 Corp\u2069', 'Ac\u200Fme']) {
        expect(await refused(['workspace', 'create', '--name', name]), JSON.stringify(name)).to.contain('changes the direction text is shown in');
      }
      expect(await adminJson<WorkspaceJson[]>(['workspace', 'list'])).to.deep.equal(before);

      const workspace = await createWorkspace('Pied Piper');
      for (const option of ['--name', '--given-name', '--family-name']) {
        const email = uniqueEmail('control');
        const names = { '--name': 'Cli Person', [option]: 'Line\nbreak' };
        const args = ['user', 'create', '--email', email, '--workspace', workspace.id, '--role', 'member', '--password-stdin', ...Object.entries(names).flat()];
        expect(await refused(args, 'correct horse battery staple\n'), option).to.contain('control character');
        const users = await adminJson<Array<{ email: string }>>(['user', 'list']);
        expect(users.map((user) => user.email), option).to.not.include(email);
      }
    });

    it('a name over 200 characters, or an email no mail system takes (over 254, a local part over 64, a hidden character), is refused and nothing is written', async () => {
      const before = await adminJson<WorkspaceJson[]>(['workspace', 'list']);
      expect(await refused(['workspace', 'create', '--name', 'W'.repeat(201)])).to.contain('at most 200 characters');
      expect(await adminJson<WorkspaceJson[]>(['workspace', 'list'])).to.deep.equal(before);
      // Counted in characters, not UTF-16 units: 200 of them, each outside the basic plane, is a name.
      expect((await createWorkspace('\u{1F3E2}'.repeat(200))).name).to.have.length(400);

      const workspace = await createWorkspace('Long Names Inc');
      const userBefore = await adminJson<Array<{ email: string }>>(['user', 'list']);
      const create = (email: string, names: Record<string, string> = {}) => refused(['user', 'create', '--email', email, '--workspace', workspace.id, '--role', 'member',
        '--password-stdin', ...Object.entries({ '--name': 'Cli Person', ...names }).flat()], 'correct horse battery staple\n');
      for (const option of ['--name', '--given-name', '--family-name']) {
        expect(await create(uniqueEmail('long'), { [option]: 'N'.repeat(201) }), option).to.contain('at most 200 characters');
      }
      expect(await create(`${'a'.repeat(65)}@example.com`)).to.contain('at most 64 characters before its @');
      expect(await create(`a@${'b'.repeat(250)}.com`)).to.contain('at most 254 characters');
      for (const email of ['al\u0001ice@example.com', 'al\u200Bice@example.com', 'alice@exam\u202Eple.com']) {
        expect(await create(email), JSON.stringify(email)).to.contain('cannot contain a control, direction-changing or invisible character');
      }
      expect(await adminJson<Array<{ email: string }>>(['user', 'list'])).to.deep.equal(userBefore);
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

    it('an email is one address however its accents were typed: stored composed, signed in with either form, never a second user who reads alike', async () => {
      const local = `jos\u00e9-${randomBytes(4).toString('hex')}`;
      const composed = `${local}@example.com`;
      const decomposed = composed.normalize('NFD');
      expect(decomposed).to.not.equal(composed);
      const password = `cli-${randomBytes(9).toString('base64url')}-secret`;
      const created = await createUser(workspace.id, decomposed, password);
      expect(created.code, created.stderr).to.equal(0);
      expect((JSON.parse(created.stdout) as { email: string }).email).to.equal(composed);
      expect(await refused(['user', 'create', '--email', composed, '--name', 'Twin', '--workspace', workspace.id, '--role', 'member', '--password-stdin'], `${password}-twin\n`))
        .to.contain('already exists');

      const client = await registerClient(server.issuer, { client_name: 'Accent App' });
      for (const typed of [composed, decomposed]) {
        const request = codeRequest(server.issuer, client.client_id);
        const callback = await authorize(new UserAgent(), request.url, server.origin, { email: typed, password });
        expect(callback.searchParams.get('code'), `signed in as ${JSON.stringify(typed)}`).to.be.a('string');
      }

      // A user stored decomposed, as the service stored an email before it composed them.
      const earlier = `rene\u0301-${randomBytes(4).toString('hex')}@example.com`;
      const store = openStore(server.store);
      try {
        await store.accounts.createUser({ id: `usr_${randomBytes(8).toString('hex')}`, email: earlier, name: 'Earlier', passwordHash: await hashPassword(password), createdAt: Math.floor(Date.now() / 1000) });
      } finally {
        await store.close();
      }
      expect(await refused(['user', 'create', '--email', earlier.normalize('NFC'), '--name', 'Twin', '--workspace', workspace.id, '--role', 'member', '--password-stdin'], `${password}-twin\n`))
        .to.contain('already exists');
      await adminJson(['member', 'add', '--workspace', workspace.id, '--email', earlier.normalize('NFC'), '--role', 'member']);
      const request = codeRequest(server.issuer, client.client_id);
      const callback = await authorize(new UserAgent(), request.url, server.origin, { email: earlier.normalize('NFC'), password });
      expect(callback.searchParams.get('code'), 'signed in as the composed form of an email stored decomposed').to.be.a('string');
    });

    it('an email is one address whether its domain is written in Unicode or in punycode: stored in Unicode, signed in with either, never a second user', async () => {
      const local = `zo\u00eb-${randomBytes(4).toString('hex')}`;
      const unicode = `${local}@ex\u00e4mple.com`;
      const punycode = `${local}@xn--exmple-cua.com`;
      const password = `cli-${randomBytes(9).toString('base64url')}-secret`;
      const created = await createUser(workspace.id, punycode, password);
      expect(created.code, created.stderr).to.equal(0);
      expect((JSON.parse(created.stdout) as { email: string }).email).to.equal(unicode);
      expect(await refused(['user', 'create', '--email', unicode, '--name', 'Twin', '--workspace', workspace.id, '--role', 'member', '--password-stdin'], `${password}-twin\n`))
        .to.contain('already exists');
      const client = await registerClient(server.issuer, { client_name: 'Punycode App' });
      for (const typed of [unicode, punycode, punycode.toUpperCase().replace(local.toUpperCase(), local)]) {
        const callback = await authorize(new UserAgent(), codeRequest(server.issuer, client.client_id).url, server.origin, { email: typed, password });
        expect(callback.searchParams.get('code'), `signed in as ${JSON.stringify(typed)}`).to.be.a('string');
      }
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

    it('a commonly used password fails, saying why and what to do instead, and is not echoed', async () => {
      passwords.push('iloveyou');
      const refusal = await refused(['user', 'create', '--email', uniqueEmail('common'), '--name', 'Common', '--workspace', workspace.id, '--role', 'member', '--password-stdin'], 'iloveyou\n');
      expect(refusal).to.equal('error: this password is one of the most commonly used ones, which attackers try first: choose another (a few unrelated words make a strong one)');
    });

    it('a password no sign-in form could carry (a line break inside, over 1024 characters) fails with a clear message', async () => {
      for (const [password, message] of [['two\nline password', /control character/], ['x'.repeat(1025), /at most 1024/]] as const) {
        passwords.push(password);
        const result = await failing(['user', 'create', '--email', uniqueEmail('unusable'), '--name', 'Unusable', '--workspace', workspace.id, '--role', 'member', '--password-stdin'], `${password}\n`);
        expect(result.stderr).to.match(message);
      }
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

    it('client delete leaves nothing of the client in the store: its registration access token goes with it', async () => {
      const iat = await admin(['iat', 'create', '--workspace', workspace.id, '--json']);
      const { initial_access_token: token } = JSON.parse(iat.stdout) as { initial_access_token: string };
      const registered = await registerClient(server.issuer, { client_name: 'Short Lived', grant_types: ['client_credentials'], redirect_uris: [] }, token);
      const tokensOf = async () => {
        const store = openStore(server.store);
        try {
          return await store.model('RegistrationAccessToken').listBy(registered.client_id);
        } finally {
          await store.close();
        }
      };
      expect(await tokensOf(), 'the registration access token, stored').to.have.length(1);
      const result = await admin(['client', 'delete', '--', registered.client_id]);
      expect(result.code, result.stderr).to.equal(0);
      expect(await tokensOf(), 'after the delete').to.deep.equal([]);
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

    it('resource-server create warns when the data API it makes credentials for is not the service\'s (run without the service\'s PORT or BASE_URL)', async () => {
      const elsewhere = await runAdmin({ ...server.env, BASE_URL: 'http://127.0.0.1:9' }, ['resource-server', 'create', '--name', 'Mistaken', '--json']);
      expect(elsewhere.code, elsewhere.stderr).to.equal(0);
      const mistaken = JSON.parse(elsewhere.stdout) as { resource: string; warning?: string };
      expect(mistaken.resource).to.equal('http://127.0.0.1:9/rest');
      expect(mistaken.warning).to.contain('nothing answers at http://127.0.0.1:9').and.contain('run the command with the service\'s settings');
      // The same service reached under another name: its BASE_URL, not this one, is the data API's.
      const otherName = server.issuer.replace('127.0.0.1', 'localhost');
      const renamed = await runAdmin({ ...server.env, BASE_URL: otherName }, ['resource-server', 'create', '--name', 'Renamed', '--json']);
      expect(renamed.code, renamed.stderr).to.equal(0);
      expect((JSON.parse(renamed.stdout) as { warning?: string }).warning).to.contain(`the service reached at ${otherName} is ${server.issuer}`);
      const right = await adminJson<{ warning?: string }>(['resource-server', 'create', '--name', 'Right']);
      expect(right).to.not.have.property('warning');
    });

    it('resource-server create takes --scope more than once, as its usage says: every value is kept', async () => {
      const created = await adminJson<{ scopes?: string[]; resource?: string }>(['resource-server', 'create', '--name', 'Two Scopes', '--resource', 'https://two-scopes.example/mcp', '--scope', 'api', '--scope', 'profile']);
      const listed = await adminJson<Array<{ resource: string; scopes: string[] }>>(['resource-server', 'list']);
      expect(listed.find(({ resource }) => resource === 'https://two-scopes.example/mcp')?.scopes, JSON.stringify(created)).to.deep.equal(['api', 'profile']);
    });

    it('resource-server create without --name, or with another --auth-method, fails with a clear message', async () => {
      expect((await failing(['resource-server', 'create'])).stderr).to.contain('--name');
      for (const method of ['none', 'private_key_jwt']) {
        expect((await failing(['resource-server', 'create', '--name', 'Gateway', '--auth-method', method])).stderr).to.contain('--auth-method');
      }
      // The data API's scopes and DPoP are not the command's to set: a usage error, nothing created.
      const before = (await adminJson<unknown[]>(['client', 'list'])).length;
      for (const extra of [['--scope', 'admin'], ['--require-dpop']]) {
        const result = await failing(['resource-server', 'create', '--name', 'Gateway', ...extra]);
        expect(result.code, result.stderr).to.equal(2);
        expect(result.stderr).to.contain('--resource');
      }
      expect(await adminJson<unknown[]>(['client', 'list'])).to.have.length(before);
    });
  });

  describe('people and workspaces', function () {
    // Each test runs the CLI (a process of its own) a dozen times or more.
    this.timeout(180_000);

    /** The refusal a token gets at the data API once it is revoked: polled, as each instance sees a revocation within the bound. */
    const REFUSED_WITHIN_MS = PROPAGATION_BOUND_MS + 1000;
    const dataApiStatus = async (credential: string) => (await api(server, '/rest/companies', { credential })).status;
    const refusedSoon = (what: string, credential: string) => eventually(what, async () => await dataApiStatus(credential) === 401, REFUSED_WITHIN_MS, 100);

    interface Person {
      id: string;
      email: string;
      password: string;
    }

    async function person(workspaceId: string, role: string, label: string): Promise<Person> {
      const email = uniqueEmail(label);
      const password = `pw-${randomBytes(6).toString('hex')}`;
      const created = await createUser(workspaceId, email, password, role);
      expect(created.code, created.stderr).to.equal(0);
      return { id: (JSON.parse(created.stdout) as { id: string }).id, email, password };
    }

    /** Signs in through the login and consent pages with `agent`, choosing `workspaceId`, and redeems the code. */
    async function signIn(agent: UserAgent, client: RegisteredClient, who: Person, workspaceId?: string): Promise<{ access_token: string; refresh_token: string }> {
      const request = codeRequest(server.issuer, client.client_id);
      const callback = await authorize(agent, request.url, server.origin, { email: who.email, password: who.password, ...(workspaceId ? { workspace: workspaceId } : {}) });
      const code = callback.searchParams.get('code');
      expect(code, callback.href).to.be.a('string');
      const response = await exchangeCode(server.issuer, client, code!, request.verifier);
      expect(response.status).to.equal(200);
      return response.json() as Promise<{ access_token: string; refresh_token: string }>;
    }

    /** Whether the browser is still signed in: prompt=none gets a code, or login_required (the client is vetted, so the error comes back). */
    async function stillSignedIn(agent: UserAgent, client: RegisteredClient): Promise<boolean> {
      const { url } = await agent.follow(codeRequest(server.issuer, client.client_id, { prompt: 'none' }).url, server.origin);
      const callback = new URL(url);
      if (callback.searchParams.get('code')) return true;
      expect(callback.searchParams.get('error'), url).to.equal('login_required');
      return false;
    }

    /** Whether the password signs in at the login page (400 with the form again when it does not). */
    async function passwordWorks(client: RegisteredClient, email: string, password: string): Promise<boolean> {
      const agent = new UserAgent();
      const { response } = await agent.follow(codeRequest(server.issuer, client.client_id).url, server.origin);
      const html = await response.text();
      const action = /<form method="post" action="([^"]+)"/.exec(html)![1]!;
      const csrf = /name="csrf" value="([^"]*)"/.exec(html)![1]!;
      const posted = await agent.request(new URL(action, server.origin).href, { form: { csrf, email, password } });
      return posted.headers.get('location') !== null;
    }

    const refresh = (client: RegisteredClient, refreshToken: string) =>
      tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client) });

    const codeClient = () => registerVettedClient(server, { grant_types: ['authorization_code', 'refresh_token'] });

    let workspace: WorkspaceJson;
    let admin1: Person;

    before(async () => {
      workspace = await createWorkspace('Globex');
      admin1 = await person(workspace.id, 'admin', 'globex-admin');
    });

    it('user list shows every user with their workspaces and roles; --workspace only that workspace\'s members', async () => {
      const viewer = await person(workspace.id, 'viewer', 'globex-viewer');
      const other = await createWorkspace('Elsewhere');
      const outsider = await person(other.id, 'member', 'elsewhere');
      type Listed = { id: string; email: string; created_at: string; memberships: Array<{ workspace_id: string; workspace_name: string; role: string }> };

      const everyone = await adminJson<Listed[]>(['user', 'list']);
      const shown = everyone.find(({ id }) => id === viewer.id);
      expect(shown).to.deep.include({ email: viewer.email, memberships: [{ workspace_id: workspace.id, workspace_name: 'Globex', role: 'viewer' }] });
      expect(everyone.map(({ id }) => id)).to.include.members([admin1.id, outsider.id]);
      const created = everyone.map(({ created_at }) => Date.parse(created_at));
      expect(created).to.deep.equal([...created].sort((a, b) => a - b));

      const members = await adminJson<Listed[]>(['user', 'list', '--workspace', workspace.id]);
      expect(members.map(({ id }) => id)).to.include.members([admin1.id, viewer.id]).and.not.to.include(outsider.id);

      const text = await admin(['user', 'list', '--workspace', other.id]);
      expect(text.stdout).to.contain(outsider.email).and.to.contain(`${other.id} (member)`).and.not.to.contain(viewer.email);
      expect(await refused(['user', 'list', '--workspace', 'ws_nowhere'])).to.contain('ws_nowhere');
    });

    it('user set-password says in words how many browsers it signed out (one session, not "1 sessions")', async () => {
      const client = await codeClient();
      const user = await person(workspace.id, 'member', 'words');
      await signIn(new UserAgent(), client, user);
      const result = await admin(['user', 'set-password', '--email', user.email, '--password-stdin'], `words-${randomBytes(6).toString('hex')}\n`);
      expect(result.code, result.stderr).to.equal(0);
      expect(result.stdout).to.match(/signed out of 1 session$/m);
    });

    it('user set-password replaces the password (checked as at creation) and signs the user out of every browser', async () => {
      const client = await codeClient();
      const user = await person(workspace.id, 'member', 'reset');
      const agent = new UserAgent();
      await signIn(agent, client, user);
      expect(await stillSignedIn(agent, client)).to.equal(true);

      passwords.push('short');
      expect(await refused(['user', 'set-password', '--email', user.email, '--password-stdin'], 'short\n')).to.match(/8 characters/);
      // The user's own email, which the output names anyway (so it is not among the passwords looked for).
      expect(await refused(['user', 'set-password', '--email', user.email, '--password-stdin'], `${user.email.toUpperCase()}\n`)).to.contain('cannot be the email address');
      passwords.push('Globex 2024');
      expect(await refused(['user', 'set-password', '--email', user.email, '--password-stdin'], 'Globex 2024\n')).to.contain('cannot be the name of the service or of the workspace');
      expect(await refused(['user', 'set-password', '--email', uniqueEmail('nobody'), '--password-stdin'], 'long-enough-1\n')).to.contain('no user with email');
      expect((await failing(['user', 'set-password', '--email', user.email])).stderr).to.contain('--password-stdin');
      // A password file saved as Latin-1: its é is no UTF-8, and would have been set as U+FFFD.
      expect(await refused(['user', 'set-password', '--email', user.email, '--password-stdin'], Buffer.from('Passw0rd-caf\xe9\n', 'latin1'))).to.contain('not UTF-8 text');

      const newPassword = `new-${randomBytes(6).toString('hex')}`;
      passwords.push(newPassword);
      const result = await adminJson<{ id: string; sessions_ended: number }>(['user', 'set-password', '--email', user.email.toUpperCase(), '--password-stdin'], `${newPassword}\n`);
      expect(result).to.deep.include({ id: user.id, sessions_ended: 1 });
      expect(await stillSignedIn(agent, client)).to.equal(false);
      expect(await passwordWorks(client, user.email, user.password)).to.equal(false);
      expect(await passwordWorks(client, user.email, newPassword)).to.equal(true);
    });

    it('user delete ends the user\'s sessions and grants: their tokens are refused within the propagation bound; the workspace\'s API keys stay', async () => {
      const client = await codeClient();
      const user = await person(workspace.id, 'member', 'leaver');
      const agent = new UserAgent();
      const tokens = await signIn(agent, client, user);
      const key = await createApiKey(server, workspace.id, { name: 'stays' });
      expect(await dataApiStatus(tokens.access_token)).to.equal(200);

      const deleted = await adminJson<Record<string, unknown>>(['user', 'delete', '--email', user.email]);
      expect(deleted).to.deep.equal({ deleted: user.id, email: user.email, memberships_ended: 1, sessions_ended: 1, grants_revoked: 1 });

      await refusedSoon('the deleted user\'s access token is refused', tokens.access_token);
      const refreshed = await refresh(client, tokens.refresh_token);
      expect(refreshed.status).to.equal(400);
      expect((await refreshed.json() as { error: string }).error).to.equal('invalid_grant');
      expect(await stillSignedIn(agent, client)).to.equal(false);
      expect(await passwordWorks(client, user.email, user.password)).to.equal(false);
      expect(await dataApiStatus(key.key)).to.equal(200);
      expect((await adminJson<Array<{ id: string }>>(['user', 'list'])).map(({ id }) => id)).not.to.include(user.id);
      expect(await refused(['user', 'delete', '--user', user.id])).to.contain(user.id);
    });

    it('member remove cut short by the store leaves the membership, to be removed again; the member added back later gets no grant of before back', async () => {
      const client = await codeClient();
      const user = await person(workspace.id, 'member', 'interrupted');
      const tokens = await signIn(new UserAgent(), client, user);
      const db = new DatabaseSync(server.store.slice('sqlite:'.length));
      // The store failing where the removal revokes the member's grant.
      db.exec("CREATE TRIGGER refuse_grant_deletes BEFORE DELETE ON oidc_models WHEN OLD.model = 'Grant' BEGIN SELECT RAISE(ABORT, 'no grant deletes'); END");
      try {
        const cut = await admin(['member', 'remove', '--workspace', workspace.id, '--email', user.email]);
        expect(cut.code, cut.stderr).to.not.equal(0);
      } finally {
        db.exec('DROP TRIGGER refuse_grant_deletes');
        db.close();
      }
      const members = await adminJson<Array<{ id: string }>>(['user', 'list', '--workspace', workspace.id]);
      expect(members.map(({ id }) => id), 'still a member: nothing was removed').to.include(user.id);
      expect(await adminJson<Record<string, unknown>>(['member', 'remove', '--workspace', workspace.id, '--email', user.email])).to.deep.include({ removed: true, grants_revoked: 1 });
      await adminJson(['member', 'add', '--workspace', workspace.id, '--email', user.email, '--role', 'member']);
      const refreshed = await refresh(client, tokens.refresh_token);
      expect([refreshed.status, (await refreshed.json() as { error: string }).error], 'the grant of before the removal').to.deep.equal([400, 'invalid_grant']);
    });

    it('says a configuration error in one line, as the service does: a bad setting, a store that cannot be opened', async () => {
      for (const [setting, value, words] of [['PORT', 'abc', /^configuration error: PORT/], ['STORE', 'sqlite:/proc/no-such-directory/db.sqlite', /^configuration error: STORE: /]] as const) {
        const result = await runAdmin({ ...server.env, [setting]: value }, ['workspace', 'list']);
        outputs.push(result.stdout, result.stderr);
        expect(result.code, result.stderr).to.equal(1);
        expect(result.stderr.trimEnd().split('\n'), result.stderr).to.have.length(1);
        expect(result.stderr).to.match(words);
      }
    });

    it('says a key-encryption key that opens nothing, or none where one is needed, in one line as the service does (configuration error: ...)', async () => {
      for (const [setting, value] of [['KEY_ENCRYPTION_KEY', Buffer.alloc(32, 5).toString('base64url')], ['BASE_URL', 'https://auth.example.com']] as const) {
        const result = await runAdmin({ ...server.env, [setting]: value }, ['resource-server', 'list']);
        outputs.push(result.stdout, result.stderr);
        expect([result.code, result.stdout], `${setting}: ${result.stderr}`).to.deep.equal([1, '']);
        expect(result.stderr.trimEnd().split('\n'), result.stderr).to.have.length(1);
        expect(result.stderr, setting).to.match(/^configuration error: .*key-encryption key/);
      }
    });

    it('warns of each setting that looks like the service\'s own but is not, once, in the words and the log line of the service at start', async () => {
      const result = await runAdmin({ ...server.env, LOG_LEVL: 'debug', PROT: '8080' }, ['workspace', 'list', '--json']);
      outputs.push(result.stdout, result.stderr);
      expect(result.code, result.stderr).to.equal(0);
      expect(JSON.parse(result.stdout), 'the output is the list still').to.be.an('array');
      const lines = result.stderr.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.map(({ level, variable, meant }) => `${String(level)} ${String(variable)} -> ${String(meant)}`)).to.deep.equal(['warn LOG_LEVL -> LOG_LEVEL', 'warn PROT -> PORT']);
      expect(lines[0]).to.include({ message: 'LOG_LEVL is not a setting of this service and is ignored; did you mean LOG_LEVEL?' });
      expect(result.stderr).not.to.include('8080');
    });

    it('warns, as the service does at start, of a key-encryption key file other users can read; its info lines stay out of the output', async () => {
      const keyFile = join(server.env.HOME!, '.config', 'workspace-oauth-server', 'key-encryption.key');
      await chmod(keyFile, 0o644);
      try {
        for (const args of [['keys', 'list', '--json'], ['resource-server', 'list', '--json']]) {
          const result = await runAdmin(server.env, args);
          outputs.push(result.stdout, result.stderr);
          expect(result.code, result.stderr).to.equal(0);
          expect(JSON.parse(result.stdout), 'the output is the list still').to.be.an('array');
          const lines = result.stderr.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
          expect(lines.map(({ level, message, file, mode }) => [level, message, file, mode]), args.join(' ')).to.deep.equal([
            ['warn', 'the key-encryption key file can be read by other users; make it owner-only (chmod 600)', keyFile, '0644'],
          ]);
        }
      } finally {
        await chmod(keyFile, 0o600);
      }
      const quiet = await runAdmin(server.env, ['keys', 'list', '--json']);
      expect([quiet.code, quiet.stderr], 'an owner-only file: nothing to say').to.deep.equal([0, '']);
    });

    it('refuses a STORE that names no store yet, for every command but quickstart, and makes none (a mistyped STORE is not a new, empty store)', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'no-store-'));
      try {
        const missing = join(dir, 'typo', 'oauth.sqlite');
        for (const args of [['user', 'list'], ['keys', 'list'], ['workspace', 'create', '--name', 'Nowhere Inc']]) {
          const result = await runAdmin({ ...server.env, STORE: `sqlite:${missing}` }, args);
          outputs.push(result.stdout, result.stderr);
          expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(1);
          expect(result.stderr.trimEnd().split('\n'), result.stderr).to.have.length(1);
          expect(result.stderr).to.equal(`configuration error: STORE: there is no SQLite store at ${missing}; check STORE and the directory this runs in (the service makes the store at its first start, and so does quickstart)\n`);
        }
        expect(await readdir(dir), 'nothing was made').to.deep.equal([]);
        // A path that is there but holds no store (a directory) is still refused as the store that cannot be opened.
        const opened = await runAdmin({ ...server.env, STORE: `sqlite:${dir}` }, ['user', 'list']);
        outputs.push(opened.stdout, opened.stderr);
        expect([opened.code, opened.stderr.trimEnd().split('\n').length], opened.stderr).to.deep.equal([1, 1]);
        expect(opened.stderr).to.match(/^configuration error: STORE: /).and.not.match(/there is no SQLite store/);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it('refuses a Redis database no service started on, for every command but quickstart, and writes nothing there (keys list makes no keys)', async () => {
      const redis = await startRedis();
      try {
        const env = { ...server.env, STORE: redis.url, KEY_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64url') };
        for (const args of [['keys', 'list'], ['keys', 'rotate', '--now'], ['user', 'list'], ['workspace', 'create', '--name', 'Nowhere Inc']]) {
          const result = await runAdmin(env, args);
          outputs.push(result.stdout, result.stderr);
          expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(1);
          expect(result.stderr).to.equal('configuration error: STORE: no service has started on this store (it holds none of the keys the service makes at its first start); check STORE (the service makes them at its first start, and so does quickstart)\n');
        }
        expect(await redisCli(redis.port, 'DBSIZE'), 'nothing was written').to.equal('0');
      } finally {
        await redis.stop();
      }
    });

    it('says a change the store did not confirm may have been made all the same (REDIS_WAIT_REPLICAS, no replica to confirm it), to be checked before it is run again', async () => {
      const redis = await startRedis();
      const onRedis = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64url') } });
      try {
        const unconfirmed = { ...onRedis.env, REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT: '100ms' };
        // Without --json, which says the same in JSON (tested with the other failures).
        const created = await runAdmin(unconfirmed, ['workspace', 'create', '--name', 'Unconfirmed Inc']);
        outputs.push(created.stdout, created.stderr);
        expect([created.code, created.stdout], created.stderr).to.deep.equal([1, '']);
        expect(created.stderr).to.match(/^error: the store did not confirm the change \(1 Redis replica \(REDIS_WAIT_REPLICAS\) did not confirm within 100 ms.*\); it may have been made all the same: check, with the list command, before running this again\n$/);
        const listed = await runAdmin(onRedis.env, ['workspace', 'list', '--json']);
        expect((JSON.parse(listed.stdout) as Array<{ name: string }>).map(({ name }) => name), 'what the message warns of').to.include('Unconfirmed Inc');
      } finally {
        await onRedis.stop();
        await redis.stop();
      }
    });

    it('user set-password, user delete and member remove change nothing when the engine cannot start (no key-encryption key to open the keys)', async () => {
      const client = await codeClient();
      const user = await person(workspace.id, 'member', 'untouched');
      const agent = new UserAgent();
      await signIn(agent, client, user);
      // An https BASE_URL needs the key-encryption key given: the commands' engine refuses to start.
      const withoutKey = { ...server.env, BASE_URL: 'https://auth.example.com' };
      passwords.push('another-password-1');
      for (const args of [
        ['user', 'set-password', '--email', user.email, '--password-stdin'],
        ['user', 'delete', '--email', user.email],
        ['member', 'remove', '--workspace', workspace.id, '--email', user.email],
      ]) {
        const result = await runAdmin(withoutKey, args, 'another-password-1\n');
        outputs.push(result.stdout, result.stderr);
        expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(1);
        expect(result.stderr, args.join(' ')).to.contain('key-encryption key');
      }
      expect(await stillSignedIn(agent, client), 'the user is still signed in').to.equal(true);
      const listed = await adminJson<Array<{ id: string; memberships: Array<{ workspace_id: string }> }>>(['user', 'list', '--workspace', workspace.id]);
      expect(listed.find(({ id }) => id === user.id)?.memberships.map(({ workspace_id: id }) => id), 'still a member').to.include(workspace.id);
    });

    it('user delete, member remove and member set-role refuse to take a workspace\'s last admin away, in one line saying what to do', async () => {
      const lone = await createWorkspace('Lone Ltd');
      const boss = await person(lone.id, 'admin', 'boss');
      for (const args of [
        ['user', 'delete', '--email', boss.email],
        ['member', 'remove', '--workspace', lone.id, '--email', boss.email],
        ['member', 'set-role', '--workspace', lone.id, '--email', boss.email, '--role', 'member'],
      ]) {
        const line = await refused(args);
        expect(line, args.join(' ')).to.equal(`error: ${boss.email} is the last admin of workspace ${lone.id} ("Lone Ltd"): make another member an admin first, or delete the workspace`);
      }
      const listed = await adminJson<Array<{ id: string; memberships: Array<{ role: string }> }>>(['user', 'list', '--workspace', lone.id]);
      expect(listed).to.have.length(1);
      expect(listed[0]!.memberships).to.deep.equal([{ workspace_id: lone.id, workspace_name: 'Lone Ltd', role: 'admin' }]);
    });

    it('member add (by --email or --user), set-role and remove; remove revokes the grants given for that workspace only', async () => {
      const second = await createWorkspace('Second Co');
      await person(second.id, 'admin', 'second-admin');
      const user = await person(workspace.id, 'member', 'mover');

      expect(await adminJson(['member', 'add', '--workspace', second.id, '--email', user.email, '--role', 'viewer']))
        .to.deep.equal({ user_id: user.id, workspace_id: second.id, role: 'viewer' });
      expect(await adminJson(['member', 'set-role', '--workspace', second.id, '--user', user.id, '--role', 'member']))
        .to.deep.equal({ user_id: user.id, workspace_id: second.id, role: 'member' });
      // Today's form, by user id, still works (and changes a role too).
      const legacy = await admin(['member', 'add', '--user', user.id, '--workspace', second.id, '--role', 'member']);
      expect(legacy.code, legacy.stderr).to.equal(0);
      const stranger = await person((await createWorkspace('Stranger Inc')).id, 'admin', 'stranger');
      expect(await refused(['member', 'set-role', '--workspace', second.id, '--email', stranger.email, '--role', 'viewer'])).to.contain('not a member');
      expect(await refused(['member', 'remove', '--workspace', second.id, '--email', stranger.email])).to.contain('not a member');
      expect(await refused(['member', 'add', '--workspace', second.id, '--email', uniqueEmail('ghost'), '--role', 'viewer'])).to.contain('no user with email');

      // A token for each workspace, through two applications.
      const [first, other] = [await codeClient(), await codeClient()];
      const forFirst = await signIn(new UserAgent(), first, user, workspace.id);
      const forSecond = await signIn(new UserAgent(), other, user, second.id);
      expect(decodeJwt(forSecond.access_token).workspace_id).to.equal(second.id);
      for (const token of [forFirst, forSecond]) expect(await dataApiStatus(token.access_token)).to.equal(200);

      const removed = await adminJson(['member', 'remove', '--workspace', second.id, '--email', user.email]);
      expect(removed).to.deep.equal({ user_id: user.id, workspace_id: second.id, role: 'member', removed: true, grants_revoked: 1 });
      await refusedSoon('the removed member\'s token for the workspace is refused', forSecond.access_token);
      expect((await refresh(other, forSecond.refresh_token)).status).to.equal(400);
      expect(await dataApiStatus(forFirst.access_token)).to.equal(200);
      expect((await refresh(first, forFirst.refresh_token)).status).to.equal(200);
    });

    it('workspace delete says what it deleted in words, one of a thing in the singular', async () => {
      const small = await createWorkspace('Small Corp');
      await person(small.id, 'admin', 'small-admin');
      await createApiKey(server, small.id);
      const result = await admin(['workspace', 'delete', '--workspace', small.id]);
      expect(result.code, result.stderr).to.equal(0);
      expect(result.stdout.trim()).to.equal(`deleted workspace ${small.id} (Small Corp): 1 membership (its people keep their accounts), `
        + '0 clients, 1 API key, 0 initial access tokens, 0 invitation links, 0 grants, 0 data records; their tokens and keys are refused from now');
    });

    it('workspace delete deletes its memberships, clients, API keys, initial access tokens, grants and records: their tokens and keys are refused', async () => {
      const doomed = await createWorkspace('Doomed Corp');
      const owner = await person(doomed.id, 'admin', 'doomed-admin');
      await adminJson(['member', 'add', '--workspace', workspace.id, '--email', owner.email, '--role', 'viewer']);
      const machine = await clientCredentialsToken(server, doomed.id);
      const key = await createApiKey(server, doomed.id);
      const userClient = await codeClient();
      const userTokens = await signIn(new UserAgent(), userClient, owner, doomed.id);
      const unused = await initialAccessToken(server, doomed.id);
      const created = await api(server, '/rest/companies', { credential: key.key, json: { name: 'Doomed Record' } });
      expect(created.status).to.equal(201);
      // An invitation link, as the members page makes one: its record, and the place it holds among the workspace's 50.
      const invitationStore = openStore(server.store);
      const invitation = await invitationsOver(invitationStore, new Accounts(invitationStore.accounts))
        .create(doomed.id, 'member', owner.id).finally(() => invitationStore.close());
      if ('refused' in invitation) throw new Error(invitation.refused.error);
      for (const credential of [machine.access_token, key.key, userTokens.access_token]) expect(await dataApiStatus(credential)).to.equal(200);

      const deleted = await adminJson<Record<string, unknown>>(['workspace', 'delete', '--workspace', doomed.id]);
      expect(deleted).to.deep.equal({
        deleted: doomed.id,
        name: 'Doomed Corp',
        memberships_ended: 1,
        clients_deleted: [machine.client.client_id],
        api_keys_revoked: [key.id],
        initial_access_tokens_deleted: 1,
        invitations_deleted: 1,
        grants_revoked: 1,
        records_deleted: { companies: 1, people: 0 },
      });
      const left = openStore(server.store);
      try {
        expect(await left.model(INVITATION_MODEL).listBy(doomed.id), 'its invitations').to.deep.equal([]);
        const marks = await left.model('ReplayDetection').list();
        expect(marks.filter(({ payload }) => payload.invitation === invitation.invitation.id), 'the place its invitation held').to.deep.equal([]);
      } finally {
        await left.close();
      }

      await refusedSoon('the deleted workspace\'s client_credentials token is refused', machine.access_token);
      await refusedSoon('the deleted workspace\'s API key is refused', key.key);
      await refusedSoon('a token a user got for the deleted workspace is refused', userTokens.access_token);
      const again = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'api', ...postCredentials(machine.client) });
      expect(again.status).to.equal(401);
      expect((await register(server.issuer, {}, unused)).status).to.equal(401);
      expect((await listClients()).map(({ client_id }) => client_id)).not.to.include(machine.client.client_id);
      expect((await adminJson<WorkspaceJson[]>(['workspace', 'list'])).map(({ id }) => id)).not.to.include(doomed.id);
      // Its people keep their accounts and other workspaces.
      const owned = (await adminJson<Array<{ id: string; memberships: Array<{ workspace_id: string }> }>>(['user', 'list'])).find(({ id }) => id === owner.id);
      expect(owned?.memberships.map(({ workspace_id }) => workspace_id)).to.deep.equal([workspace.id]);
      expect(await refused(['workspace', 'delete', '--workspace', doomed.id])).to.equal(`error: no workspace with id ${doomed.id}`);
    });

    it('workspace delete run again after one cut short once the workspace had gone deletes what was left bound to it', async () => {
      const half = await createWorkspace('Half Deleted Ltd');
      const machine = await clientCredentialsToken(server, half.id);
      const key = await createApiKey(server, half.id);
      // As a deletion cut short in its second pass leaves it: the workspace gone, what an admin made meanwhile still there.
      const store = openStore(server.store);
      try {
        expect(await store.accounts.deleteWorkspace(half.id)).to.equal(true);
      } finally {
        await store.close();
      }
      const again = await adminJson<Record<string, unknown>>(['workspace', 'delete', '--workspace', half.id]);
      expect(again).to.deep.include({ deleted: half.id, clients_deleted: [machine.client.client_id], api_keys_revoked: [key.id] });
      await refusedSoon('the API key left behind is refused', key.key);
      expect((await listClients()).map(({ client_id }) => client_id)).not.to.include(machine.client.client_id);
      expect(await refused(['workspace', 'delete', '--workspace', half.id]), 'nothing left').to.equal(`error: no workspace with id ${half.id}`);
    });

    it('an initial access token of a deleted workspace registers nothing, also one the deletion did not find', async () => {
      const gone = await createWorkspace('Gone GmbH');
      const token = await initialAccessToken(server, gone.id);
      // As a token made before tokens were listed by workspace: its record does not name it.
      const store = openStore(server.store);
      try {
        await store.accounts.deleteWorkspace(gone.id);
      } finally {
        await store.close();
      }
      const response = await register(server.issuer, {}, token);
      expect(response.status).to.equal(401);
      expect((await response.json() as { error: string }).error).to.equal('invalid_token');
    });
  });

  describe('API keys', () => {
    it('api-key create refuses a name an active key of the workspace has, compared as a person reads it; a revoked or expired key\'s name, or another workspace\'s, may be used', async () => {
      const { id: workspaceId } = await createWorkspace('Key Names Ltd');
      const { id: otherId } = await createWorkspace('Other Key Names Ltd');
      const first = await adminJson<{ id: string }>(['api-key', 'create', '--workspace', workspaceId, '--name', 'Caf\u00e9 export']);
      // The list, and a revocation, tell keys apart by their names.
      for (const same of ['  CAF\u00c9 EXPORT ', 'cafe\u0301 export']) {
        expect(await refused(['api-key', 'create', '--workspace', workspaceId, '--name', same]), same)
          .to.equal(`error: the workspace already has an active key named "Caf\u00e9 export" (${first.id}): give this one another name, or revoke that one first`);
      }
      expect(await adminJson<unknown[]>(['api-key', 'list', '--workspace', workspaceId]), 'nothing made').to.have.length(1);
      await adminJson(['api-key', 'create', '--workspace', otherId, '--name', 'Caf\u00e9 export']);

      await adminJson(['api-key', 'create', '--workspace', workspaceId, '--name', 'brief', '--expires-in', '1']);
      // Waits 2 s, by which time "brief" has expired too.
      await adminJson(['api-key', 'revoke', first.id]);
      await adminJson(['api-key', 'create', '--workspace', workspaceId, '--name', 'caf\u00e9 export']);
      await adminJson(['api-key', 'create', '--workspace', workspaceId, '--name', 'Brief']);
    });
  });

  describe('output', function () {
    this.timeout(120_000);

    it('the commands no other test runs with --json name their fields in snake_case and give times in ISO 8601 too', async () => {
      // Every --json output is checked as it is printed (expectJsonManners); these are the ones left.
      const { id: workspaceId } = await createWorkspace('Json Ltd');
      const apiKey = await adminJson<{ id: string }>(['api-key', 'create', '--workspace', workspaceId, '--name', 'json']);
      await adminJson(['api-key', 'list', '--workspace', workspaceId]);
      await adminJson(['api-key', 'revoke', apiKey.id]);
      await adminJson(['iat', 'create', '--workspace', workspaceId]);
      await adminJson(['keys', 'list']);
      await adminJson(['resource-server', 'create', '--name', 'Json API']);
      await adminJson(['resource-server', 'list']);
      await adminJson(['client', 'list']);
      const doomed = await registerClient(server.issuer, { client_name: 'Json Doomed' });
      await adminJson(['client', 'delete', doomed.client_id]);
    });
  });

  // Mocha runs a suite's own tests before its nested suites: this suite comes last.
  describe('secrets', () => {
    it('repeats no value given where an id, an email or a URI goes that does not look like one (a secret pasted in the wrong place), only its length; one that does is named back', async () => {
      const workspace = await adminJson<{ id: string }>(['workspace', 'create', '--name', 'Pasted Secrets Ltd']);
      const apiKey = (await adminJson<{ key: string }>(['api-key', 'create', '--workspace', workspace.id, '--name', 'pasted'])).key;
      const password = 'Pasted-Password-4455';
      const pasted: Array<[string[], string]> = [
        [['api-key', 'revoke', apiKey], apiKey],
        [['client', 'delete', apiKey], apiKey],
        [['resource-server', 'delete', password], password],
        [['user', 'delete', '--user', password], password],
        [['user', 'delete', '--email', password], password],
        [['user', 'set-password', '--email', password, '--password-stdin'], password],
        [['member', 'add', '--workspace', workspace.id, '--email', password, '--role', 'viewer'], password],
        [['api-key', 'list', '--workspace', apiKey], apiKey],
        [['iat', 'create', '--workspace', password], password],
      ];
      for (const [args, secret] of pasted) {
        const line = await refused(args, 'long-enough-1\n');
        expect(line, args.slice(0, 2).join(' ')).to.not.contain(secret);
        expect(line, args.slice(0, 2).join(' ')).to.contain(`(${secret.length} characters, not repeated`);
      }
      // What has the shape of what was asked for is named back, so a mistyped id reads as one.
      expect(await refused(['api-key', 'revoke', 'key_AAAAAAAAAAAA'])).to.equal('error: no API key with id key_AAAAAAAAAAAA');
      expect(await refused(['api-key', 'list', '--workspace', 'ws_AAAAAAAAAAAAAAAA'])).to.equal('error: no workspace with id ws_AAAAAAAAAAAAAAAA');
      expect(await refused(['user', 'delete', '--email', 'nobody-here@example.com'])).to.equal('error: no user with email nobody-here@example.com');
    });

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
