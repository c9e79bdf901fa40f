import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';
import { decodeJwt } from 'jose';

import { openStore } from '../../adapters/index.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { freePort, freePorts, runAdmin, startServer, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { watchProcess, type WatchedProcess } from '../support/watched_process.ts';

/**
 * `npm run admin -- quickstart`, a newcomer's first run, against a real server's store: what it
 * prints is followed as printed. The authorization URL is opened (the login and consent pages
 * answered as a person would), and the printed curl commands are run with curl itself, on
 * loopback, with only the values a step's answer gives ($CODE, $REFRESH_TOKEN, $ACCESS_TOKEN)
 * set. Terminals are real pseudo-terminals (util-linux `script`).
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const REDIRECT_URI = 'http://127.0.0.1:8976/callback';

interface Printed {
  clientId: string;
  clientSecret: string;
  authorizationUrl: string;
  state: string;
  exchange: string;
  refresh: string;
  clientCredentials: string;
  dataApi: string;
}

/** The flow as the text output shows it: the URL to open and the curl command of each step. */
function parsePrinted(stdout: string): Printed {
  const line = (pattern: RegExp) => {
    const match = pattern.exec(stdout);
    if (!match) throw new Error(`nothing like ${pattern} in:\n${stdout}`);
    return match[1]!;
  };
  const authorizationUrl = line(/^\s+(http\S+\/oauth\/authorize\?\S+)$/m);
  return {
    clientId: line(/^\s+client_id\s+(\S+)$/m),
    clientSecret: line(/^\s+client_secret\s+(\S+)$/m),
    authorizationUrl,
    state: new URL(authorizationUrl).searchParams.get('state')!,
    exchange: line(/^\s+(curl .*grant_type=authorization_code.*)$/m),
    refresh: line(/^\s+(curl .*grant_type=refresh_token.*)$/m),
    clientCredentials: line(/^\s+(curl .*grant_type=client_credentials.*)$/m),
    dataApi: line(/^\s+(curl .*\/rest\/companies.*)$/m),
  };
}

/** Runs a printed curl command in a POSIX shell, with the variables a newcomer would have set; adds only `-w` for the status. */
function runPrinted(command: string, variables: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', `${command} -w '\\n%{http_code}'`], { env: { PATH: process.env.PATH ?? '', ...variables } });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { err += chunk.toString(); });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${command} exited ${code}: ${err}`));
      const cut = out.lastIndexOf('\n');
      resolve({ status: Number(out.slice(cut + 1)), body: out.slice(0, cut) });
    });
  });
}

async function runJson(command: string, variables: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const { status, body } = await runPrinted(command, variables);
  expect(status, `${command}\n${body}`).to.equal(200);
  return JSON.parse(body) as Record<string, unknown>;
}

/** A command on a pseudo-terminal: its output is what a person would see on the screen. */
interface Terminal extends WatchedProcess {
  type(keys: string): void;
}

function onTerminal(command: string, env: Record<string, string>): Terminal {
  const child = spawn('script', ['-q', '-e', '-c', command, '/dev/null'], { cwd: ROOT, env: { ...env, SHELL: '/bin/sh' }, stdio: ['pipe', 'pipe', 'pipe'] });
  return { ...watchProcess(child), type: (keys) => { child.stdin.write(keys); } };
}

/** The workspaces the store holds, by name: what a quickstart refused before writing must not have added to. */
async function workspaceNames(server: TestServer): Promise<string[]> {
  const listed = await server.admin(['workspace', 'list', '--json']);
  return (JSON.parse(listed.stdout) as Array<{ name: string }>).map((workspace) => workspace.name);
}

/** The command the service's first-start hint announces (the store has no users yet). */
async function announcedCommand(server: TestServer): Promise<string> {
  while (!server.logs().includes('no users yet')) await new Promise((resolve) => setTimeout(resolve, 50));
  const hint = server.logs().split('\n').filter((line) => line.includes('no users yet')).map((line) => JSON.parse(line) as { command: string })[0];
  return hint!.command;
}

/** The settings an announced command sets before `npm run admin`, as a shell would (none of these test values needs quoting). */
function announcedSettings(command: string): Record<string, string> {
  const settings = command.slice(0, command.indexOf(' npm run admin')).split(' ');
  return Object.fromEntries(settings.map((setting) => [setting.slice(0, setting.indexOf('=')), setting.slice(setting.indexOf('=') + 1)]));
}

const uniqueEmail = (label: string) => `${label}-${randomBytes(4).toString('hex')}@example.com`;
const newPassword = () => `qs-${randomBytes(9).toString('base64url')}-pw`;

describe('admin quickstart', function () {
  this.timeout(60_000);

  let server: TestServer;
  const passwords: string[] = [];
  const outputs: string[] = [];
  /** The demo client quickstart created first, as it printed it (its secret shown once, there). */
  let demo: { clientId: string; clientSecret: string } | undefined;
  /** An email a refused quickstart was given: creating nothing, it left the email free for the next. */
  const refusedEmail = uniqueEmail('newcomer');

  async function quickstart(args: string[], password?: string, env: Record<string, string> = server.env) {
    if (password) passwords.push(password);
    const result = await runAdmin(env, ['quickstart', ...args], password === undefined ? undefined : `${password}\n`);
    outputs.push(result.stdout, result.stderr);
    return result;
  }

  before(async () => {
    server = await startServer();
  });

  after(async () => {
    await server?.stop();
  });

  it('at first start without a terminal, the hint naming quickstart is a JSON log line like every other, its command carrying the service\'s settings', async () => {
    while (!server.logs().includes('no users yet')) await new Promise((resolve) => setTimeout(resolve, 50));
    const lines = server.logs().split('\n').filter((line) => line.trim() !== '');
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const hint = parsed.find((entry) => String(entry.message).startsWith('no users yet'));
    expect(hint).to.include({ level: 'warn', command: `BASE_URL=${server.issuer} STORE=${server.store} npm run admin -- quickstart` });
    // Any other admin command made in another terminal needs the same settings.
    expect(hint).to.have.property('separately').that.contains(`BASE_URL=${server.issuer} STORE=${server.store} npm run admin -- workspace create`);
    expect(server.logs()).to.not.contain('No users yet.');
  });

  it('without a terminal, a missing --email, --name or --password-stdin is a usage error naming it, and nothing is created', async () => {
    const password = newPassword();
    const cases: Array<[string[], string]> = [
      [['--name', 'Ann', '--password-stdin'], '--email'],
      [['--email', uniqueEmail('ann'), '--password-stdin'], '--name'],
      [['--email', uniqueEmail('ann'), '--name', 'Ann'], '--password-stdin'],
    ];
    for (const [args, named] of cases) {
      const result = await quickstart(args, password);
      expect(result.code, result.stderr).to.equal(2);
      expect(result.stdout).to.equal('');
      expect(result.stderr).to.contain(named).and.match(/usage/i);
    }
    expect(await workspaceNames(server)).to.deep.equal([]);
  });

  it('refuses at once, before writing anything, a password that breaks the account rules, a bad email or an empty name', async () => {
    const email = refusedEmail;
    const cases: Array<[string[], string, RegExp]> = [
      [['--email', email, '--name', 'Cy Checked'], 'short', /a password needs at least 8 characters; nothing was written/],
      [['--email', email, '--name', 'Cy Checked'], 'Cy Checked 2024', /a password cannot be the user's name or a part of it, which attackers try first: .*; nothing was written/],
      [['--email', 'not-an-email', '--name', 'Cy Checked'], newPassword(), /"not-an-email" is not an email address; nothing was written/],
      [['--email', email, '--name', ' '], newPassword(), /a user needs a name; nothing was written/],
      [['--email', email, '--name', 'Cy Checked', '--workspace-name', ' '], newPassword(), /a workspace needs a name; nothing was written/],
      [['--email', email, '--name', 'Cy Checked', '--workspace-name', 'Two\nlines'], newPassword(), /a workspace's name cannot contain a line break, a tab or another control character; nothing was written/],
    ];
    for (const [args, password, refusal] of cases) {
      const result = await quickstart([...args, '--password-stdin'], password);
      expect(result.code, result.stderr).to.equal(1);
      expect(result.stderr).to.match(refusal);
      expect(result.stdout).to.equal('');
    }
    expect(await workspaceNames(server)).to.deep.equal([]);
  });

  it('creates a workspace, its admin and a demo client (with the email a refused run was given), says which store it wrote to, and the printed URL and curl commands work as printed', async () => {
    const email = refusedEmail;
    const password = newPassword();
    const result = await quickstart(['--workspace-name', 'Acme', '--email', email, '--name', 'Ann Newcomer', '--password-stdin'], password);
    expect(result.code, result.stderr).to.equal(0);
    const database = server.store.slice('sqlite:'.length);
    expect(result.stdout).to.contain(`Created in the SQLite store at ${database}: workspace `);
    expect(result.stderr).to.contain(`in the SQLite store at ${database}, for the service at ${server.issuer}`);
    expect(result.stderr, 'the service answered over the same store').to.not.match(/Nothing answers|What answers/);
    const printed = parsePrinted(result.stdout);
    demo = { clientId: printed.clientId, clientSecret: printed.clientSecret };
    const workspaceId = /workspace (ws_\S+) \("Acme"\)/.exec(result.stdout)?.[1];
    expect(workspaceId, result.stdout).to.be.a('string');

    // 1. The URL, opened in a browser: sign in as the new admin, Allow.
    const url = new URL(printed.authorizationUrl);
    expect(url.origin).to.equal(server.origin);
    expect(url.searchParams.get('code_challenge_method')).to.equal('S256');
    const callback = await authorize(new UserAgent(), printed.authorizationUrl, server.origin, { email, password });
    expect(`${callback.origin}${callback.pathname}`).to.equal(REDIRECT_URI);
    expect(callback.searchParams.get('state')).to.equal(printed.state);
    const code = callback.searchParams.get('code');
    expect(code, callback.href).to.be.a('string');

    // 2. The exchange, with the code from the address bar.
    const tokens = await runJson(printed.exchange, { CODE: code! });
    expect(tokens).to.include.keys('access_token', 'refresh_token');
    expect(decodeJwt(tokens.access_token as string)).to.include({ workspace_id: workspaceId, role: 'admin', client_id: printed.clientId });

    // 3. A refresh, with the refresh token of that answer.
    const refreshed = await runJson(printed.refresh, { REFRESH_TOKEN: tokens.refresh_token as string });
    expect(refreshed).to.include.keys('access_token', 'refresh_token');
    expect(refreshed.refresh_token).to.not.equal(tokens.refresh_token);

    // 4. Client credentials: a token for the workspace.
    const workspaceToken = await runJson(printed.clientCredentials);
    expect(decodeJwt(workspaceToken.access_token as string)).to.include({ workspace_id: workspaceId, client_id: printed.clientId });

    // 5. The data API, with the user's token and with the workspace's.
    for (const token of [refreshed.access_token, workspaceToken.access_token]) {
      const companies = await runJson(printed.dataApi, { ACCESS_TOKEN: token as string });
      expect(companies).to.have.nested.property('data.companies');
    }
  });

  it('the demo client is one an operator stands behind: bound to the workspace in client list (no secret shown), its error answers redirected directly', async () => {
    const list = await server.admin(['client', 'list', '--json']);
    const clients = JSON.parse(list.stdout) as Array<Record<string, unknown>>;
    const listed = clients.find((client) => client.client_name === 'Quickstart demo');
    expect(demo, 'the demo client quickstart printed (the test before)').to.not.equal(undefined);
    expect(listed).to.include({ client_id: demo!.clientId, token_endpoint_auth_method: 'client_secret_post' });
    expect(listed!.workspace_id).to.match(/^ws_/);
    expect(listed!.grant_types).to.deep.equal(['authorization_code', 'refresh_token', 'client_credentials']);
    expect(listed!.redirect_uris).to.deep.equal([REDIRECT_URI]);
    expect(demo!.clientSecret.length, 'the printed secret').to.be.greaterThan(20);
    expect(list.stdout, 'the demo client\'s secret').to.not.contain(demo!.clientSecret);
    expect(list.stdout).to.not.contain('client_secret"');

    // Vetted: an error answer goes straight back to the application, as for a client registered with an initial access token.
    const url = new URL(`${server.issuer}/oauth/authorize`);
    url.search = new URLSearchParams({
      client_id: String(listed!.client_id), response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api bogus', state: 'st',
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256',
    }).toString();
    const answer = await fetch(url, { redirect: 'manual' });
    const location = new URL(answer.headers.get('location') ?? '', server.issuer);
    expect(`${location.origin}${location.pathname}`, `${answer.status} ${location.href}`).to.equal(REDIRECT_URI);
    expect(location.searchParams.get('error')).to.equal('invalid_scope');
  });

  it('once users exist it refuses, saying what to do instead; --force adds another workspace, admin and client; --json gives the same flow and the store to scripts', async () => {
    const password = newPassword();
    const email = uniqueEmail('second');
    const refused = await quickstart(['--email', email, '--name', 'Second', '--password-stdin'], password);
    expect(refused.code).to.equal(1);
    expect(refused.stdout).to.equal('');
    expect(refused.stderr).to.contain('no users yet').and.contain('--force').and.contain('user create');

    const forced = await quickstart(['--email', email, '--name', 'Second', '--password-stdin', '--force', '--json', '--base-url', `${server.issuer}/`], password);
    expect(forced.code, forced.stderr).to.equal(0);
    const json = JSON.parse(forced.stdout) as {
      base_url: string;
      store: string;
      workspace: { id: string; name: string };
      user: { email: string; role: string };
      client: { client_id: string; client_secret: string; workspace_id: string };
      authorization: { url: string; state: string; code_verifier: string; code_challenge: string };
      commands: { exchange: string; refresh: string; client_credentials: string; data_api: string };
    };
    expect(json.base_url).to.equal(server.issuer);
    expect(json.store).to.equal(server.store);
    expect(json.workspace.name).to.equal('My workspace');
    expect(json.user).to.include({ email, role: 'admin' });
    expect(json.client.workspace_id).to.equal(json.workspace.id);
    expect(new URL(json.authorization.url).searchParams.get('code_challenge')).to.equal(json.authorization.code_challenge);
    expect(json.commands.exchange).to.contain(`code_verifier=${json.authorization.code_verifier}`);

    const workspaceToken = await runJson(json.commands.client_credentials);
    expect(decodeJwt(workspaceToken.access_token as string)).to.include({ workspace_id: json.workspace.id });
    const companies = await runJson(json.commands.data_api, { ACCESS_TOKEN: workspaceToken.access_token as string });
    expect(companies).to.have.nested.property('data.companies');

    const again = await quickstart(['--email', email.toUpperCase(), '--name', 'Second', '--password-stdin', '--force'], password);
    expect(again.code).to.equal(1);
    expect(again.stderr).to.contain(`a user with email ${email.toUpperCase()} already exists; nothing was written`);
  });

  it('on a terminal it asks for what the flags leave out, never shows the password, asks again with the reason for one too short or typed differently, and the admin it makes can sign in', async () => {
    const email = uniqueEmail('typed');
    const password = `qs-${randomBytes(9).toString('base64url')}-typed`;
    passwords.push(password);
    const terminal = onTerminal('exec node src/cli/admin.ts quickstart --force', server.env);
    await terminal.showsNext(/Workspace name \[My workspace\]: /);
    terminal.type('Typed Co\r');
    await terminal.showsNext(/Your email address: /);
    terminal.type('not an email\r');
    await terminal.showsNext(/"not an email" is not an email address; try again\.[^]*?Your email address: /);
    terminal.type(`${email}\r`);
    await terminal.showsNext(/Your name: /);
    terminal.type('Tess Typed\r');
    await terminal.showsNext(/Password \(at least 8 characters, not shown\): /);
    terminal.type('short\r');
    await terminal.showsNext(/A password needs at least 8 characters; try again\.[^]*?Password \(at least 8 characters, not shown\): /);
    // Said to the person who just typed their email, their name and the workspace's: "your", not "the user's".
    for (const [guess, refusal] of [
      [email, /A password cannot be your email address or a part of it, which attackers try first: choose another \([^)]*\); try again\./],
      ['Tess Typed 2024', /A password cannot be your name or a part of it, which attackers try first: choose another \([^)]*\); try again\./],
      ['Typed Co!!', /A password cannot be the name of the service or of the workspace you are creating, which attackers try first: choose another \([^)]*\); try again\./],
    ] as const) {
      terminal.type(`${guess}\r`);
      await terminal.showsNext(new RegExp(`${refusal.source}[^]*?Password \\(at least 8 characters, not shown\\): `));
    }
    terminal.type(`${password}\r`);
    await terminal.showsNext(/Password again: /);
    terminal.type(`${password}-not\r`);
    await terminal.showsNext(/The two passwords differ; type it again\.[^]*?Password \(at least 8 characters, not shown\): /);
    expect(await workspaceNames(server), 'nothing written while it asks').to.not.include('Typed Co');
    terminal.type(`${password}\r`);
    await terminal.showsNext(/Password again: /);
    terminal.type(`${password}\r`);
    expect(await terminal.exited, terminal.output()).to.equal(0);
    outputs.push(terminal.output());

    expect(terminal.output()).to.match(/workspace ws_\S+ \("Typed Co"\)/);
    expect(terminal.output()).to.not.contain('short');
    const printed = parsePrinted(terminal.output().replaceAll('\r', ''));
    const callback = await authorize(new UserAgent(), printed.authorizationUrl, server.origin, { email, password });
    expect(callback.searchParams.get('code'), callback.href).to.be.a('string');
  });

  it('an https BASE_URL without a key-encryption key, which the service would refuse, stops it before anything is written', async () => {
    const before = await workspaceNames(server);
    const email = uniqueEmail('https');
    const refused = await quickstart(['--force', '--workspace-name', 'Over https', '--email', email, '--name', 'Hal Https', '--password-stdin'], newPassword(), {
      ...server.env, BASE_URL: 'https://auth.example.com',
    });
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.match(/error: the service would not start with these settings: BASE_URL is https, so the key-encryption key must be given.*; nothing was written/);
    expect(await workspaceNames(server)).to.deep.equal(before);
  });

  it('a service at the printed URL running on another store than the one given stops it before anything is written there', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oauth-other-store-'));
    const other = `sqlite:${join(dir, 'oauth.sqlite')}`;
    try {
      const refused = await quickstart(['--email', uniqueEmail('elsewhere'), '--name', 'Els Where', '--password-stdin'], newPassword(), { ...server.env, STORE: other });
      expect(refused.code).to.equal(1);
      expect(refused.stderr).to.contain(`the service at ${server.issuer} runs on another store than the SQLite store at ${join(dir, 'oauth.sqlite')}`);
      expect(refused.stderr).to.contain('nothing was written');
      const store = openStore(other);
      try {
        expect(await store.accounts.countUsers()).to.equal(0);
        expect(await store.accounts.listWorkspaces()).to.deep.equal([]);
      } finally {
        await store.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('takes back the store it made for a first run it refuses, and the key-encryption key file: nothing was written means no file either', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oauth-taken-back-'));
    try {
      const env = { ...server.env, STORE: `sqlite:${join(dir, 'data', 'oauth.sqlite')}`, XDG_CONFIG_HOME: join(dir, 'config') };
      const refused = await quickstart(['--email', uniqueEmail('taken-back'), '--name', 'Tak En', '--password-stdin'], newPassword(), env);
      expect(refused.code).to.equal(1);
      expect(refused.stderr).to.match(/runs on another store than .*; nothing was written/);
      const left = (await readdir(dir, { recursive: true, withFileTypes: true })).filter((entry) => entry.isFile()).map((entry) => entry.name);
      expect(left, 'no store, no key file').to.deep.equal([]);
      const after = await runAdmin(env, ['user', 'list']);
      expect([after.code, after.stderr.trim()], 'the store is not there for a command to take as the service\'s').to.deep.equal([1, `configuration error: STORE: there is no SQLite store at ${join(dir, 'data', 'oauth.sqlite')}; check STORE and the directory this runs in (the service makes the store at its first start, and so does quickstart)`]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('--listen with no service answering, or with its port taken, stops it before anything is written, saying why', async () => {
    const before = await workspaceNames(server);
    const nobody = `http://127.0.0.1:${await freePort()}`;
    const down = await quickstart(['--force', '--listen', '--listen-port', '0', '--email', uniqueEmail('down'), '--name', 'Dee Down', '--password-stdin'], newPassword(), {
      ...server.env, BASE_URL: nobody,
    });
    expect(down.code).to.equal(1);
    expect(down.stderr).to.match(new RegExp(`nothing answers at ${nobody} \\(ECONNREFUSED\\), and --listen exchanges the code there: start the service first`));

    const held = createServer();
    await new Promise<void>((resolve) => held.listen(0, '127.0.0.1', resolve));
    const { port } = held.address() as { port: number };
    try {
      const taken = await quickstart(['--force', '--listen-port', String(port), '--email', uniqueEmail('taken'), '--name', 'Tak En', '--password-stdin'], newPassword());
      expect(taken.code).to.equal(1);
      expect(taken.stderr).to.contain(`127.0.0.1:${port}, where the demo client's browser comes back, is in use: choose another port with --listen-port PORT`);
      expect(taken.stderr).to.contain('nothing was written');
    } finally {
      held.close();
    }
    expect(await workspaceNames(server)).to.deep.equal(before);
  });

  it('without --listen, no service answering is only said (it may be started after); --listen has no --json', async () => {
    const nobody = `http://127.0.0.1:${await freePort()}`;
    const later = await quickstart(['--force', '--workspace-name', 'Started later', '--email', uniqueEmail('later'), '--name', 'Lay Ter', '--password-stdin'], newPassword(), {
      ...server.env, BASE_URL: nobody,
    });
    expect(later.code, later.stderr).to.equal(0);
    expect(later.stderr).to.contain(`Nothing answers at ${nobody} (ECONNREFUSED). Start the service before opening the URL below`);
    expect(await workspaceNames(server)).to.include('Started later');

    const json = await quickstart(['--force', '--listen', '--json', '--email', uniqueEmail('json'), '--name', 'Jay Son', '--password-stdin'], newPassword());
    expect(json.code).to.equal(2);
    expect(json.stderr).to.contain('--listen waits for a browser');
  });

  it('no password ever appears in what the CLI printed or in the server log', () => {
    expect(passwords.length).to.be.greaterThan(2);
    for (const password of passwords) {
      for (const output of [...outputs, server.logs()]) expect(output).to.not.contain(password);
    }
  });
});

describe('first start on STORE=memory:', function () {
  this.timeout(60_000);

  it('says that no user can be added to it, rather than a quickstart command that could not reach it', async () => {
    const server = await startServer({ store: 'memory:' });
    try {
      while (!server.logs().includes('no users yet')) await new Promise((resolve) => setTimeout(resolve, 50));
      const hint = server.logs().split('\n').filter((line) => line.includes('no users yet')).map((line) => JSON.parse(line) as Record<string, unknown>)[0];
      expect(hint?.message).to.match(/none can be added: STORE=memory: lives in this process alone.*start it on a sqlite: file/);
      expect(hint).to.not.have.property('command');
    } finally {
      await server.stop();
    }
  });
});

describe('admin quickstart with STORE=redis', function () {
  this.timeout(30_000);

  let redis: RedisServer;
  let server: TestServer;

  before(async () => {
    redis = await startRedis();
    server = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64url') } });
  });

  after(async () => {
    await server?.stop();
    await redis?.stop();
  });

  it('the first-start hint carries the Redis store and names the key-encryption key to set as for the service, never its value', async () => {
    while (!server.logs().includes('no users yet')) await new Promise((resolve) => setTimeout(resolve, 50));
    const hint = server.logs().split('\n').filter((line) => line.includes('no users yet')).map((line) => JSON.parse(line) as Record<string, unknown>)[0];
    expect(hint).to.include({
      command: `BASE_URL=${server.issuer} STORE=redis://127.0.0.1:${redis.port}/0 npm run admin -- quickstart`,
      set_as_for_the_service: 'KEY_ENCRYPTION_KEY',
    });
    expect(server.logs()).to.not.contain(server.env.KEY_ENCRYPTION_KEY);
  });

  it('without the key-encryption key it writes nothing (as the service would not start); with it, the rerun creates the same and the printed flow works', async () => {
    const email = uniqueEmail('redis');
    const password = newPassword();
    const args = ['quickstart', '--email', email, '--name', 'Rae Redis', '--password-stdin'];
    const { KEY_ENCRYPTION_KEY: _key, ...withoutKey } = server.env;
    const refused = await runAdmin(withoutKey, args, `${password}\n`);
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.contain(`Creating a workspace, its admin and a demo client in the Redis store at redis://127.0.0.1:${redis.port}/0`);
    expect(refused.stderr).to.contain('needs a key-encryption key kept outside it: set KEY_ENCRYPTION_KEY or KEY_ENCRYPTION_KEY_FILE; nothing was written');
    expect(await workspaceNames(server)).to.deep.equal([]);

    const result = await server.admin(args, `${password}\n`);
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stdout).to.contain(`Created in the Redis store at redis://127.0.0.1:${redis.port}/0: workspace`);
    const printed = parsePrinted(result.stdout);
    const callback = await authorize(new UserAgent(), printed.authorizationUrl, server.origin, { email, password });
    const tokens = await runJson(printed.exchange, { CODE: callback.searchParams.get('code')! });
    const companies = await runJson(printed.dataApi, { ACCESS_TOKEN: tokens.access_token as string });
    expect(companies).to.have.nested.property('data.companies');
    expect(await runJson(printed.clientCredentials)).to.include.keys('access_token');
  });

  it('a Redis that does not answer is said in one line, and nothing is written', async () => {
    const unreachable = `redis://127.0.0.1:${await freePort()}/0`;
    const result = await runAdmin({ ...server.env, STORE: unreachable }, ['quickstart', '--force', '--email', uniqueEmail('gone'), '--name', 'Gon E', '--password-stdin'], `${newPassword()}\n`);
    expect(result.code).to.equal(1);
    expect(result.stderr).to.match(new RegExp(`error: the Redis store at ${unreachable} does not answer \\(.+\\); nothing was written\\n$`));
  });
});

describe('first start on a terminal', function () {
  this.timeout(30_000);

  it('with no users, the service says in a plain sentence to run quickstart with its settings, and run as said in another shell it prints this service\'s URLs and writes to its store', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oauth-tty-'));
    const [port, metricsPort] = await freePorts(2);
    const database = join(dir, 'data', 'oauth.sqlite');
    // As a newcomer would: PORT=... npm start, BASE_URL left to follow PORT.
    const settings = {
      PATH: process.env.PATH ?? '',
      // The key-encryption key is made under HOME: a temporary one, never the real one.
      HOME: join(dir, 'home'),
    };
    const terminal = onTerminal('exec node src/main.ts', {
      ...settings,
      PORT: String(port),
      HOST: '127.0.0.1',
      STORE: `sqlite:${database}`,
      METRICS_PORT: String(metricsPort),
    });
    try {
      const [, command] = await terminal.shows(/No users yet\. To create the first workspace, its admin and a demo client to try it with, run:\s+(.*npm run admin -- quickstart)\r?\n/);
      expect(command).to.equal(`PORT=${port} STORE=sqlite:${database} npm run admin -- quickstart`);
      // The log line stays too (in whichever form the logger gives a terminal).
      await terminal.shows(/no users yet: create the first workspace, its admin and a demo client with the admin CLI/);

      // In another terminal, where none of the service's settings are set.
      const email = uniqueEmail('announced');
      const password = newPassword();
      const run = spawn('sh', ['-c', `${command} --email ${email} --name 'An Nounced' --password-stdin --json`], { cwd: ROOT, env: settings });
      let stdout = '';
      run.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
      const ran = watchProcess(run);
      run.stdin.end(`${password}\n`);
      expect(await ran.exited, ran.output()).to.equal(0);
      // npm names the script it runs before the command's own output.
      const json = JSON.parse(stdout.slice(stdout.indexOf('{'))) as { base_url: string; store: string; authorization: { url: string } };
      expect(json.base_url).to.equal(`http://localhost:${port}`);
      expect(json.store).to.equal(`sqlite:${database}`);
      expect(ran.output(), 'the service answered at the URL, over the same store').to.not.match(/Nothing answers|What answers/);
      const callback = await authorize(new UserAgent(), json.authorization.url, `http://localhost:${port}`, { email, password });
      expect(callback.searchParams.get('code'), callback.href).to.be.a('string');
    } finally {
      terminal.child.kill('SIGTERM');
      await terminal.exited;
      await rm(dir, { recursive: true, force: true });
    }
  });
});

for (const setting of ['DPOP_REQUIRED', 'FAPI']) {
  describe(`admin quickstart with ${setting}=on`, function () {
    this.timeout(60_000);

    let server: TestServer;

    before(async () => {
      server = await startServer({ env: { [setting]: 'on' } });
    });

    after(async () => {
      await server?.stop();
    });

    it('--listen, with no demo client to listen for, is refused as called wrongly, naming the setting, before anything is written', async () => {
      const child = spawn(process.execPath, [
        'src/cli/admin.ts', 'quickstart', '--listen', '--listen-port', '0', '--email', uniqueEmail('listen'), '--name', 'Lis Ten', '--password-stdin',
      ], { cwd: ROOT, env: server.env, stdio: ['pipe', 'pipe', 'pipe'] });
      child.stdin.end(`${newPassword()}\n`);
      const run = watchProcess(child);
      // Were it not refused, it would wait for a browser that never comes.
      const stop = setTimeout(() => child.kill('SIGINT'), 15_000);
      try {
        expect(await run.exited, run.output()).to.equal(2);
      } finally {
        clearTimeout(stop);
      }
      expect(run.output()).to.contain(`error: --listen exchanges a code as the demo client, and with ${setting}=on the service would refuse a client with a secret and bearer tokens`);
      expect(run.output()).to.contain('run quickstart without --listen').and.contain('quickstart --help');
      expect(await workspaceNames(server)).to.deep.equal([]);
      expect(JSON.parse((await server.admin(['user', 'list', '--json'])).stdout)).to.deep.equal([]);
    });

    it(`run as the first-start hint announces it (with ${setting}=on), it creates the workspace and its admin, no demo client, and says why and what to do instead; an API key it points to works meanwhile`, async () => {
      const command = await announcedCommand(server);
      expect(command).to.match(new RegExp(` ${setting}=on npm run admin -- quickstart$`));
      const { [setting]: _asForTheService, ...withoutSetting } = server.env;
      const email = uniqueEmail('strict');
      const result = await runAdmin({ ...withoutSetting, ...announcedSettings(command) }, [
        'quickstart', '--workspace-name', 'Strict', '--email', email, '--name', 'Sam Strict', '--password-stdin',
      ], `${newPassword()}\n`);
      expect(result.code, result.stderr).to.equal(0);
      expect(result.stderr).to.contain(`Creating a workspace and its admin (no demo client: ${setting}=on) in the SQLite store`);
      const workspaceId = /workspace (ws_\S+) \("Strict"\) and its admin usr_\S+ \(/.exec(result.stdout)?.[1];
      expect(workspaceId, result.stdout).to.be.a('string');
      const paragraph = /^No demo client\. (.+)$/m.exec(result.stdout)?.[1];
      expect(paragraph, result.stdout).to.contain(`With ${setting}=on`).and.contain('DPoP proof');
      expect(paragraph).to.contain(`iat create --workspace ${workspaceId}`).and.contain('docs/api-guide.md').and.contain('"DPoP (sender-constrained tokens)"');
      expect(result.stdout).to.not.match(/client_secret|\/oauth\/authorize|^\s+curl /m);

      // Nothing half-written: the admin of the workspace, and no client.
      expect(JSON.parse((await server.admin(['client', 'list', '--json'])).stdout)).to.deep.equal([]);
      const users = JSON.parse((await server.admin(['user', 'list', '--json'])).stdout) as Array<{ email: string; memberships: unknown[] }>;
      expect(users.map((user) => user.email)).to.deep.equal([email]);
      expect(users[0]!.memberships).to.deep.equal([{ workspace_id: workspaceId, workspace_name: 'Strict', role: 'admin' }]);

      const [, keyCommand] = /npm run admin -- (api-key create --workspace \S+ --name NAME)\./.exec(paragraph!) ?? [];
      expect(keyCommand).to.equal(`api-key create --workspace ${workspaceId} --name NAME`);
      const created = await server.admin(['api-key', 'create', '--workspace', workspaceId!, '--name', 'meanwhile', '--json']);
      const { key } = JSON.parse(created.stdout) as { key: string };
      const companies = await fetch(`${server.issuer}/rest/companies`, { headers: { authorization: `Bearer ${key}` } });
      expect(companies.status).to.equal(200);
    });

    it('with no service answering, says to start it before using what it made, pointing to no URL it does not print', async () => {
      const nobody = `http://127.0.0.1:${await freePort()}`;
      const result = await runAdmin({ ...server.env, BASE_URL: nobody }, [
        'quickstart', '--force', '--workspace-name', 'Strict later', '--email', uniqueEmail('strict-later'), '--name', 'Sam Later', '--password-stdin',
      ], `${newPassword()}\n`);
      expect(result.code, result.stderr).to.equal(0);
      expect(result.stderr).to.contain(`Nothing answers at ${nobody} (ECONNREFUSED). Start the service before you use what is made here`);
      expect(result.stderr + result.stdout).to.not.contain('URL below');
    });

    it('--json says the same to scripts: client, authorization and commands null, client_skipped naming the setting with the reason', async () => {
      const email = uniqueEmail('strict-json');
      const result = await runAdmin(server.env, ['quickstart', '--force', '--json', '--email', email, '--name', 'Jay Strict', '--password-stdin'], `${newPassword()}\n`);
      expect(result.code, result.stderr).to.equal(0);
      const json = JSON.parse(result.stdout) as Record<string, unknown> & { workspace: { id: string }; client_skipped: { settings: string[]; reason: string } };
      expect(json).to.include({ base_url: server.issuer, store: server.store, client: null, authorization: null, commands: null });
      expect(json.user).to.include({ email, role: 'admin' });
      expect(json.client_skipped.settings).to.deep.equal([setting]);
      expect(json.client_skipped.reason).to.contain(`With ${setting}=on`).and.contain(`iat create --workspace ${json.workspace.id}`);
      expect(JSON.parse((await server.admin(['client', 'list', '--json'])).stdout)).to.deep.equal([]);
    });
  });
}

describe('admin quickstart with PAR_REQUIRED=on', function () {
  this.timeout(60_000);

  let server: TestServer;

  before(async () => {
    server = await startServer({ env: { PAR_REQUIRED: 'on' } });
  });

  after(async () => {
    await server?.stop();
  });

  it('run as the first-start hint announces it, it prints the push first; pushed as printed, the URL with the request_uri it answers and the other steps work as printed', async () => {
    const command = await announcedCommand(server);
    expect(command).to.match(/ PAR_REQUIRED=on npm run admin -- quickstart$/);
    const { PAR_REQUIRED: _asForTheService, ...withoutSetting } = server.env;
    const email = uniqueEmail('pushed');
    const password = newPassword();
    const result = await runAdmin({ ...withoutSetting, ...announcedSettings(command) }, ['quickstart', '--email', email, '--name', 'Pat Pushed', '--password-stdin'], `${password}\n`);
    expect(result.code, result.stderr).to.equal(0);
    const printed = parsePrinted(result.stdout);
    const push = /^\s+(curl .*\/oauth\/par .*)$/m.exec(result.stdout)?.[1];
    expect(push, result.stdout).to.be.a('string');
    expect(result.stdout).to.contain('The service takes only pushed authorization requests (PAR_REQUIRED=on)');

    // The address bar carries the client_id and the request_uri alone.
    const url = new URL(printed.authorizationUrl);
    expect([...url.searchParams.keys()]).to.deep.equal(['client_id', 'request_uri']);
    const pushed = await runPrinted(push!);
    expect(pushed.status, pushed.body).to.equal(201);
    const { request_uri: requestUri } = JSON.parse(pushed.body) as { request_uri: string };
    const callback = await authorize(new UserAgent(), `${printed.authorizationUrl}${requestUri}`, server.origin, { email, password });
    expect(`${callback.origin}${callback.pathname}`).to.equal(REDIRECT_URI);
    expect(callback.searchParams.get('state')).to.equal(/ -d state=(\S+)/.exec(push!)?.[1]);

    const tokens = await runJson(printed.exchange, { CODE: callback.searchParams.get('code')! });
    const refreshed = await runJson(printed.refresh, { REFRESH_TOKEN: tokens.refresh_token as string });
    const companies = await runJson(printed.dataApi, { ACCESS_TOKEN: refreshed.access_token as string });
    expect(companies).to.have.nested.property('data.companies');
    expect(await runJson(printed.clientCredentials)).to.include.keys('access_token');
  });

  it('--json gives scripts the push as commands.par, and the authorization URL its request_uri is appended to', async () => {
    const result = await runAdmin(server.env, ['quickstart', '--force', '--json', '--email', uniqueEmail('pushed-json'), '--name', 'Jo Pushed', '--password-stdin'], `${newPassword()}\n`);
    expect(result.code, result.stderr).to.equal(0);
    const json = JSON.parse(result.stdout) as { client: { client_id: string }; authorization: { url: string; code_challenge: string }; commands: { par: string } };
    expect(json.authorization.url).to.equal(`${server.issuer}/oauth/authorize?client_id=${json.client.client_id}&request_uri=`);
    expect(json.commands.par).to.contain(`code_challenge=${json.authorization.code_challenge}`);
    const pushed = await runPrinted(json.commands.par);
    expect(pushed.status, pushed.body).to.equal(201);
    expect(JSON.parse(pushed.body)).to.include.keys('request_uri');
  });
});
