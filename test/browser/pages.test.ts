import { createServer, type Server } from 'node:http';
import { crc32, deflateSync } from 'node:zlib';

import { expect } from 'chai';
import type { Browser, BrowserContext, Page, Response as PageResponse } from 'playwright-core';

import { clientDisplay } from '../../src/pages/client_display.ts';
import { cspOrigin, htmlContentSecurityPolicy } from '../../src/pages/csp.ts';
import { captureRedirect, launchBrowser, newPage, signIn } from '../support/browser.ts';
import { REDIRECT_URI, codeRequest, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { PHONE, axeViolations, checkPage, imagesSettled } from '../support/page_audit.ts';
import { seedUser, startServer, type TestServer } from '../support/server.ts';

/**
 * A PNG drawn in code (RGBA, no compression library beyond zlib): a blue disc with a white ring,
 * so the screenshots show something that looks like a logo.
 */
function logoPng(size: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 6, 0, 0, 0], 8); // 8 bits, RGBA, deflate, no filter, no interlace
  const rows = Buffer.alloc(size * (1 + size * 4));
  const centre = (size - 1) / 2;
  for (let y = 0; y < size; y += 1) {
    const row = y * (1 + size * 4);
    for (let x = 0; x < size; x += 1) {
      const r = Math.hypot(x - centre, y - centre) / (size / 2);
      const pixel = r > 1 ? [0, 0, 0, 0] : r > 0.55 && r < 0.7 ? [255, 255, 255, 255] : [11, 87, 208, 255];
      rows.set(pixel, row + 1 + x * 4);
    }
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

interface LogoServer {
  origin: string;
  logoUri: string;
  /** Every request that arrived: its path and the Referer it carried, if any. */
  requests: Array<{ path: string; referer: string | undefined }>;
  close(): Promise<void>;
}

/** The application's own web server, on a free loopback port: it serves the logo (never cached). */
async function startLogoServer(): Promise<LogoServer> {
  const png = logoPng(96);
  const requests: LogoServer['requests'] = [];
  const server: Server = createServer((request, response) => {
    requests.push({ path: request.url ?? '', referer: request.headers.referer });
    if (request.url === '/logo.png') {
      response.writeHead(200, { 'content-type': 'image/png', 'content-length': png.length, 'cache-control': 'no-store' });
      response.end(png);
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    logoUri: `${origin}/logo.png`,
    requests,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** A page's Content-Security-Policy as directive name -> sources. */
function directives(policy: string | undefined): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const part of (policy ?? '').split(';')) {
    const [name, ...sources] = part.trim().split(/\s+/);
    if (name) map.set(name.toLowerCase(), sources);
  }
  return map;
}

describe('login, consent and error pages: the application\'s logo and documents, accessibility, phone and desktop', function () {
  this.timeout(60_000);

  let server: TestServer;
  let browser: Browser;
  let logos: LogoServer;
  let otherLogos: LogoServer;
  const contexts: BrowserContext[] = [];
  let clientCount = 0;

  before(async function () {
    [server, browser, logos, otherLogos] = await Promise.all([startServer(), launchBrowser(), startLogoServer(), startLogoServer()]);
  });

  afterEach(async function () {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  });

  after(async function () {
    await browser?.close();
    await server?.stop();
    await logos?.close();
    await otherLogos?.close();
  });

  async function open(): Promise<Page> {
    const { context, page } = await newPage(browser, { viewport: PHONE });
    contexts.push(context);
    await captureRedirect(page, REDIRECT_URI);
    return page;
  }

  async function newClient(metadata: Record<string, unknown> = {}): Promise<RegisteredClient> {
    clientCount += 1;
    return registerClient(server.issuer, { client_name: `Pages Test App ${clientCount}`, ...metadata });
  }

  /** A client with a logo served by `from`, and a privacy policy and terms of service. */
  const clientWithDocuments = (from: LogoServer, metadata: Record<string, unknown> = {}) => newClient({
    logo_uri: from.logoUri,
    policy_uri: `${from.origin}/privacy`,
    tos_uri: `${from.origin}/terms`,
    ...metadata,
  });

  const loginHeading = (page: Page) => page.getByRole('heading', { level: 1, name: 'Sign in' });
  const consentHeading = (page: Page) => page.getByRole('heading', { level: 1, name: /^Authorize\b/ });

  /** The next page the browser shows from the server: a document answered 200 (not a redirect on the way). */
  const nextDocument = (page: Page) => page.waitForResponse((response) => response.request().resourceType() === 'document'
    && response.status() === 200 && response.url().startsWith(server.origin));

  /** The logo (alt text naming the application, loaded) and the two documents, as the application's. */
  async function expectApplicationShown(page: Page, client: RegisteredClient, from: LogoServer): Promise<void> {
    const logo = page.getByRole('img', { name: `${client.client_name} logo` });
    expect(await logo.isVisible(), 'logo visible').to.equal(true);
    expect(await logo.getAttribute('src')).to.equal(from.logoUri);
    await imagesSettled(page);
    expect(await logo.evaluate((image: HTMLImageElement) => image.naturalWidth), 'the logo loaded').to.be.greaterThan(0);
    const box = await logo.boundingBox();
    expect(box!.width, 'logo width').to.be.within(32, 96);
    expect(box!.height, 'logo height').to.be.within(32, 96);

    for (const [name, href] of [['Privacy policy', client.policy_uri], ['Terms of service', client.tos_uri]]) {
      const link = page.getByRole('link', { name: String(name), exact: true });
      expect(await link.isVisible(), `${name} visible`).to.equal(true);
      expect(await link.getAttribute('href')).to.equal(href);
      expect((await link.getAttribute('rel'))?.split(' ')).to.include.members(['noopener', 'noreferrer']);
      expect(await link.getAttribute('target'), 'opens as a normal link').to.equal(null);
    }
    const docs = await page.locator('.client-docs').innerText();
    expect(docs, 'the documents are said to be the application\'s').to.include(`${client.client_name}’s own documents, not this server’s`);
  }

  /** The page's policy opens img-src to the logo's origin and nothing else. */
  function expectImagesOnlyFrom(response: PageResponse, origin: string): void {
    const policy = response.headers()['content-security-policy'];
    const parsed = directives(policy);
    expect(parsed.get('img-src'), policy).to.deep.equal([origin]);
    expect(parsed.get('default-src'), policy).to.deep.equal(["'none'"]);
    expect(policy!.split(origin).length - 1, `${origin} named once: ${policy}`).to.equal(1);
  }

  function expectNoImages(response: PageResponse): void {
    const policy = response.headers()['content-security-policy'];
    expect(directives(policy).has('img-src'), policy).to.equal(false);
    expect(directives(policy).get('default-src'), policy).to.deep.equal(["'none'"]);
  }

  describe('the application\'s logo, privacy policy and terms of service', function () {
    it('shows them on the login and consent pages, the logo loaded from its origin, which alone the policy allows', async function () {
      const user = await seedUser(server, [{ workspace: 'Logo Viewers' }]);
      const client = await clientWithDocuments(logos);
      const page = await open();
      const before = logos.requests.length;

      const login = await page.goto(codeRequest(server.issuer, client.client_id).url);
      await loginHeading(page).waitFor();
      await expectApplicationShown(page, client, logos);
      expectImagesOnlyFrom(login!, logos.origin);
      const loginRequests = logos.requests.slice(before);
      expect(loginRequests.map((request) => request.path), 'the logo was fetched from the application\'s server').to.deep.equal(['/logo.png']);
      expect(loginRequests[0]!.referer, 'the interaction URL is not sent to the application').to.equal(undefined);

      const consent = nextDocument(page);
      await signIn(page, user);
      await consentHeading(page).waitFor();
      await expectApplicationShown(page, client, logos);
      expectImagesOnlyFrom(await consent, logos.origin);
      expect(logos.requests.slice(before).map((request) => request.path)).to.deep.equal(['/logo.png', '/logo.png']);
    });

    it('shows only the documents there are, and no image and no img-src without a logo', async function () {
      const user = await seedUser(server, [{ workspace: 'Policy Only' }]);
      const client = await newClient({ policy_uri: `${logos.origin}/privacy` });
      const page = await open();

      const login = await page.goto(codeRequest(server.issuer, client.client_id).url);
      await loginHeading(page).waitFor();
      expectNoImages(login!);
      expect(await page.locator('img').count()).to.equal(0);
      expect(await page.getByRole('link', { name: 'Privacy policy' }).getAttribute('href')).to.equal(`${logos.origin}/privacy`);
      expect(await page.getByRole('link', { name: 'Terms of service' }).count()).to.equal(0);

      const consent = nextDocument(page);
      await signIn(page, user);
      await consentHeading(page).waitFor();
      expectNoImages(await consent);
      expect(await page.locator('img').count()).to.equal(0);
      expect(await page.getByRole('link', { name: 'Privacy policy' }).isVisible()).to.equal(true);
    });

    it('never shows one application\'s logo or documents on another\'s pages', async function () {
      const user = await seedUser(server, [{ workspace: 'Two Apps' }]);
      const first = await clientWithDocuments(logos, { client_name: 'First App With Logo' });
      const second = await clientWithDocuments(otherLogos, { client_name: 'Second App With Another Logo' });
      const plain = await newClient({ client_name: 'Plain App Without Logo' });

      // The first application's pages, then in the same browser session the plain one's consent.
      const page = await open();
      await page.goto(codeRequest(server.issuer, first.client_id).url);
      await signIn(page, user);
      await consentHeading(page).waitFor();
      await expectApplicationShown(page, first, logos);
      await page.getByRole('button', { name: 'Allow', exact: true }).click();
      await page.waitForURL(`${REDIRECT_URI}*`);

      const firstLogoRequests = logos.requests.length;
      const plainConsent = await page.goto(codeRequest(server.issuer, plain.client_id).url);
      await consentHeading(page).waitFor();
      expect(await page.getByLabel('Password').count(), 'no login: the session is reused').to.equal(0);
      expectNoImages(plainConsent!);
      expect(await page.locator('img').count()).to.equal(0);
      expect(await page.getByRole('link').filter({ hasNotText: /^Sign out$/ }).count(), 'no documents (the one link is Sign out)').to.equal(0);
      expect(await page.locator('main').innerText()).to.not.include('First App');

      // The second application's login page, in a fresh browser: its own logo, from its own origin only.
      const other = await open();
      const login = await other.goto(codeRequest(server.issuer, second.client_id).url);
      await loginHeading(other).waitFor();
      await expectApplicationShown(other, second, otherLogos);
      expectImagesOnlyFrom(login!, otherLogos.origin);
      expect(login!.headers()['content-security-policy']).to.not.include(logos.origin);
      expect(logos.requests.length, 'nothing more fetched from the first application').to.equal(firstLogoRequests);
    });

    it('renders only http(s) URLs, and a logo only when its origin can be written into the policy', function () {
      const display = clientDisplay('id', {
        clientName: 'App',
        logoUri: 'javascript:alert(1)',
        policyUri: 'data:text/html,<script>alert(1)</script>',
        tosUri: 'JavaScript:alert(1)',
      });
      expect(display).to.deep.equal({ name: 'App' });
      expect(clientDisplay('id', { logoUri: 'http://a%3bb/logo.png' }), 'a host that would end the directive').to.deep.equal({ name: 'id' });
      expect(clientDisplay('id', { logoUri: 'https://user:pw@example.com/l.png' })).to.deep.equal({ name: 'id' });
      expect(clientDisplay('id', { clientName: 'App', logoUri: 'https://CDN.Example.com:8443/a/logo.png?v=1', policyUri: 'https://example.com/p', tosUri: 'vbscript:x' })).to.deep.equal({
        name: 'App',
        logo: { src: 'https://cdn.example.com:8443/a/logo.png?v=1', origin: 'https://cdn.example.com:8443' },
        policyUri: 'https://example.com/p',
      });
      expect(cspOrigin(new URL('http://[::1]:8080/x'))).to.equal('http://[::1]:8080');
      expect(cspOrigin(new URL('http://a,b/'))).to.equal(undefined);
      expect(() => htmlContentSecurityPolicy('n', { imgSrc: 'http://a;b' })).to.throw();
      expect(htmlContentSecurityPolicy('n', {})).to.not.include('img-src');
    });
  });

  describe('every page: axe, phone and desktop screenshots, no horizontal scrolling on a phone', function () {
    const longWorkspaces = [
      { workspace: 'Northwind Traders International Holdings (EMEA)' },
      { workspace: 'Southwind', role: 'member' as const },
      { workspace: 'Eastwind Viewers', role: 'viewer' as const },
    ];

    it('login (empty, then a wrong password) and consent for one workspace, without a logo', async function () {
      const user = await seedUser(server, [{ workspace: 'Acme Single Workspace' }]);
      const client = await newClient({ client_name: 'Phone Friendly Application With A Rather Long Name' });
      const page = await open();

      await page.goto(codeRequest(server.issuer, client.client_id).url);
      await loginHeading(page).waitFor();
      await checkPage(page, 'login');

      await signIn(page, user, 'not-the-password');
      await page.getByRole('alert').waitFor();
      await checkPage(page, 'login-error');

      await signIn(page, user);
      await consentHeading(page).waitFor();
      await checkPage(page, 'consent-one');
    });

    it('consent for several workspaces, without a logo', async function () {
      const user = await seedUser(server, longWorkspaces);
      const client = await newClient({ client_name: 'Reporting Dashboard' });
      const page = await open();

      await page.goto(codeRequest(server.issuer, client.client_id).url);
      await signIn(page, user);
      await consentHeading(page).waitFor();
      await checkPage(page, 'consent-several');
    });

    it('login and consent for one workspace, with a logo and documents', async function () {
      const user = await seedUser(server, [{ workspace: 'Acme Single Workspace' }]);
      const client = await clientWithDocuments(logos, { client_name: 'Acme Expense Reports' });
      const page = await open();

      await page.goto(codeRequest(server.issuer, client.client_id).url);
      await loginHeading(page).waitFor();
      await checkPage(page, 'login-logo');

      await signIn(page, user);
      await consentHeading(page).waitFor();
      await checkPage(page, 'consent-one-logo');
    });

    it('a wrong password and consent for several workspaces, with a logo and documents', async function () {
      const user = await seedUser(server, longWorkspaces);
      const client = await clientWithDocuments(logos, { client_name: 'An Application With A Very Long Name That Wraps On Phones' });
      const page = await open();

      await page.goto(codeRequest(server.issuer, client.client_id).url);
      await signIn(page, user, 'not-the-password');
      await page.getByRole('alert').waitFor();
      await checkPage(page, 'login-error-logo');

      await signIn(page, user);
      await consentHeading(page).waitFor();
      await checkPage(page, 'consent-several-logo');
    });

    it('the audit does report violations (a login page whose email field lost its label fails)', async function () {
      const client = await newClient();
      const page = await open();
      await page.goto(codeRequest(server.issuer, client.client_id).url);
      await loginHeading(page).waitFor();
      await page.evaluate(() => document.querySelector('label[for="email"]')?.remove());
      const violations = await axeViolations(page);
      expect(violations.map(({ id, impact }) => `${id} ${impact}`)).to.include('label critical');
    });

    it('the error page (an unknown client_id)', async function () {
      const page = await open();
      const response = await page.goto(codeRequest(server.issuer, 'no-such-client').url);
      expect(response!.status()).to.equal(400);
      await page.getByRole('heading', { level: 1 }).waitFor();
      await checkPage(page, 'error');
    });
  });
});
