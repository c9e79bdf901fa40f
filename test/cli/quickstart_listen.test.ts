import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';
import { decodeJwt } from 'jose';
import type { Browser, Page } from 'playwright-core';

import { launchBrowser, newPage, signIn } from '../support/browser.ts';
import { checkPage } from '../support/page_audit.ts';
import { freePort, startServer, type TestServer } from '../support/server.ts';
import { watchProcess, type WatchedProcess } from '../support/watched_process.ts';

/**
 * `quickstart --listen`: the quickstart as a real child process, on the same store and settings
 * as a real service, answering on the demo client's redirect URI itself; Chromium follows the
 * authorization URL it prints, signs in and answers the consent page as a person would.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Listening {
  process: WatchedProcess;
  email: string;
  password: string;
  authorizationUrl: string;
  redirectUri: string;
  state: string;
}

/** Starts `quickstart --listen` on a free port. */
async function runListening(server: TestServer): Promise<Pick<Listening, 'process' | 'email' | 'password'>> {
  const port = await freePort();
  const email = `listen-${randomBytes(4).toString('hex')}@example.com`;
  const password = `qs-${randomBytes(9).toString('base64url')}-pw`;
  const child = spawn(process.execPath, [
    'src/cli/admin.ts', 'quickstart', '--force', '--listen', '--listen-port', String(port), '--email', email, '--name', 'Lis Tener', '--password-stdin',
  ], { cwd: ROOT, env: server.env, stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.end(`${password}\n`);
  return { process: watchProcess(child), email, password };
}

/** Starts `quickstart --listen` on a free port and waits for the URL it prints. */
async function startListening(server: TestServer): Promise<Listening> {
  const { process: watched, email, password } = await runListening(server);
  const [, authorizationUrl] = await watched.shows(/^\s+(http\S+\/oauth\/authorize\?\S+)$/m);
  await watched.shows(/Listening at \S+ for the browser to come back/);
  const url = new URL(authorizationUrl!);
  return { process: watched, email, password, authorizationUrl: authorizationUrl!, redirectUri: url.searchParams.get('redirect_uri')!, state: url.searchParams.get('state')! };
}

const heading = (page: Page) => page.getByRole('heading', { level: 1 }).innerText();

describe('admin quickstart --listen', function () {
  this.timeout(60_000);

  let server: TestServer;
  let browser: Browser;

  before(async () => {
    [server, browser] = await Promise.all([startServer(), launchBrowser()]);
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  it('answers at the redirect URI: a refusal and an answer of another run are said on the page and in one line, and it waits on; then, allowed, it shows the code, exchanges it and prints tokens that work at the data API', async () => {
    const run = await startListening(server);
    const port = new URL(run.redirectUri).port;
    expect(run.redirectUri, 'the demo client registered with the chosen port').to.equal(`http://127.0.0.1:${port}/callback`);
    const { context, page } = await newPage(browser);
    try {
      // Deny: the vetted demo client gets access_denied at its redirect URI.
      await page.goto(run.authorizationUrl);
      await signIn(page, run);
      await page.getByRole('button', { name: 'Deny', exact: true }).click();
      await page.waitForURL((url) => url.href.startsWith(run.redirectUri));
      expect(await heading(page)).to.equal('Not authorized');
      expect(await page.locator('main').innerText()).to.contain('access_denied').and.contain('Open the authorization URL again');
      await run.process.showsNext(/the authorization was not granted: access_denied.*Open the authorization URL again to retry, or press Ctrl-C to stop\./);

      // An answer with another state (an older URL): not used, said so.
      const stale = await fetch(`${run.redirectUri}?code=not-this-one&state=another-run`);
      expect(stale.status).to.equal(400);
      expect(await stale.text()).to.contain('carries another state than the authorization URL the quickstart printed');
      await run.process.showsNext(/with another state than this run's .* so it was not used/);
      expect(run.process.output()).to.not.contain('not-this-one');

      // Again, and Allow.
      await page.goto(run.authorizationUrl);
      await page.getByRole('button', { name: 'Allow', exact: true }).click();
      await page.waitForURL((url) => url.href.startsWith(run.redirectUri));
      const code = new URL(page.url()).searchParams.get('code')!;
      expect(new URL(page.url()).searchParams.get('state')).to.equal(run.state);
      expect(await heading(page)).to.equal('It worked');
      expect(await page.locator('main').innerText()).to.contain(code);
      await checkPage(page, 'quickstart-listener-worked');
    } finally {
      await context.close();
    }

    expect(await run.process.exited, run.process.output()).to.equal(0);
    const output = run.process.output();
    expect(output).to.match(/Code received: \S+ \(with this run's state\)/);
    const token = (name: string) => new RegExp(`^\\s+${name}\\s+(\\S+)$`, 'm').exec(output)?.[1];
    const accessToken = token('access_token');
    expect(accessToken, output).to.be.a('string');
    expect(token('refresh_token')).to.be.a('string');
    expect(token('expires_in')).to.equal('3600');
    expect(output).to.match(/^\s+scope\s+api profile$/m);
    expect(decodeJwt(accessToken!)).to.include({ role: 'admin' });

    const companies = await fetch(`${server.issuer}/rest/companies`, { headers: { authorization: `Bearer ${accessToken}` } });
    expect(companies.status).to.equal(200);
    expect(await companies.json()).to.have.nested.property('data.companies');
    expect(output).to.not.contain(run.password);
  });

  it('a service gone by the time the code arrives is said on the page and in one line, and it waits on', async () => {
    const alone = await startServer();
    const run = await startListening(alone);
    try {
      await alone.stop();
      const answer = await fetch(`${run.redirectUri}?code=some-code&state=${run.state}`);
      expect(answer.status).to.equal(502);
      expect(await answer.text()).to.contain(`the service does not answer at ${alone.issuer}/oauth/token (ECONNREFUSED): start it`);
      await run.process.showsNext(/the service does not answer at \S+ \(ECONNREFUSED\): start it \(npm start\)\. Open the authorization URL again to retry/);
      expect(run.process.child.exitCode, 'still listening').to.equal(null);
    } finally {
      run.process.child.kill('SIGINT');
      await run.process.exited;
    }
  });
});

describe('admin quickstart --listen with PAR_REQUIRED=on', function () {
  this.timeout(60_000);

  let server: TestServer;
  let browser: Browser;
  /** Stopped after each test, however it ended: a quickstart that never got its code still listens. */
  let listening: WatchedProcess | undefined;

  before(async () => {
    [server, browser] = await Promise.all([startServer({ env: { PAR_REQUIRED: 'on' } }), launchBrowser()]);
  });

  afterEach(async () => {
    if (listening?.child.exitCode !== null) return;
    listening.child.kill('SIGINT');
    await listening.exited;
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  it('prints its own start URL, which pushes the request each time it is opened: denied, then opened again and allowed, the code is exchanged and the tokens work', async () => {
    const run = await runListening(server);
    listening = run.process;
    const { context, page } = await newPage(browser);
    // What the browser's address bar carries at the authorization endpoint.
    const authorizationRequests: URL[] = [];
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (url.pathname === '/oauth/authorize') authorizationRequests.push(url);
    });
    try {
      const [, startUrl] = await run.process.shows(/^\s+(http:\/\/127\.0\.0\.1:\d+\/start)$/m);
      await run.process.shows(/Listening at \S+ for the browser to come back/);
      expect(run.process.output()).to.match(/^\s+curl .*\/oauth\/par .*$/m);
      await page.goto(startUrl!);
      await signIn(page, run);
      await page.getByRole('button', { name: 'Deny', exact: true }).click();
      await page.waitForURL((url) => url.pathname === '/callback');
      expect(await heading(page)).to.equal('Not authorized');
      await run.process.showsNext(/the authorization was not granted: access_denied/);

      // Opened again: a fresh push, as the first request_uri is used up.
      await page.goto(startUrl!);
      await page.getByRole('button', { name: 'Allow', exact: true }).click();
      await page.waitForURL((url) => url.pathname === '/callback');
      expect(await heading(page)).to.equal('It worked');
      expect(await run.process.exited, run.process.output()).to.equal(0);
    } finally {
      await context.close();
    }
    expect(authorizationRequests.map((url) => [...url.searchParams.keys()])).to.deep.equal([['client_id', 'request_uri'], ['client_id', 'request_uri']]);
    const [first, second] = authorizationRequests.map((url) => url.searchParams.get('request_uri'));
    expect(first).to.match(/^urn:ietf:params:oauth:request_uri:/);
    expect(second).to.not.equal(first);

    const accessToken = /^\s+access_token\s+(\S+)$/m.exec(run.process.output())?.[1];
    const companies = await fetch(`${server.issuer}/rest/companies`, { headers: { authorization: `Bearer ${accessToken}` } });
    expect(companies.status).to.equal(200);
    expect(run.process.output()).to.not.contain(run.password);
  });
});
