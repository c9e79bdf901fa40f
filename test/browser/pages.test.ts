import { createServer, type Server } from 'node:http';
import { crc32, deflateSync } from 'node:zlib';

import { expect } from 'chai';
import type { Page, Response as PageResponse } from 'playwright-core';

import { clientDisplay } from '../../src/pages/client_display.ts';
import { cspOrigin, htmlContentSecurityPolicy } from '../../src/pages/csp.ts';
import { browserForSuite, captureRedirect, focusedElement, signIn } from '../support/browser.ts';
import { REDIRECT_URI, codeRequest, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { PHONE, axeViolations, checkPage, imagesSettled } from '../support/page_audit.ts';
import { startDocumentServer, type DocumentServer } from '../support/document_server.ts';
import { seedUser, startServer, type TestServer } from '../support/server.ts';
import { testCertificates, type TestCertificates } from '../support/tls.ts';

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
  let logos: LogoServer;
  let otherLogos: LogoServer;
  const browser = browserForSuite({ viewport: PHONE });
  let clientCount = 0;

  before(async function () {
    [server, logos, otherLogos] = await Promise.all([startServer(), startLogoServer(), startLogoServer()]);
  });

  after(async function () {
    await server?.stop();
    await logos?.close();
    await otherLogos?.close();
  });

  async function open(): Promise<Page> {
    const page = await browser.open();
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

  const focusedId = async (page: Page) => (await focusedElement(page))?.id;
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

    it('names the host each document link goes to, as the website link does, on the login and consent pages', async function () {
      const user = await seedUser(server, [{ workspace: 'Document Hosts' }]);
      const client = await newClient({ policy_uri: 'https://privacy.example/policy', tos_uri: 'https://legal.example.net:8443/terms', client_uri: 'https://app.example/' });

      /** What a reader sees of the links, and what a screen reader says of each document link beside its name. */
      async function expectHostsNamed(page: Page): Promise<void> {
        const links = await page.locator('.client-docs-links').innerText();
        expect(links).to.include('Website (app.example)').and.include('Privacy policy (privacy.example)').and.include('Terms of service (legal.example.net:8443)');
        for (const [name, host] of [['Privacy policy', 'privacy.example'], ['Terms of service', 'legal.example.net:8443']]) {
          const link = page.getByRole('link', { name: String(name), exact: true });
          const description = await link.evaluate((element) => (element.getAttribute('aria-describedby') ?? '').split(' ')
            .map((id) => document.getElementById(id)?.textContent ?? '').join(' '));
          expect(description, `${name}: its accessible description`).to.include(String(host));
        }
      }

      const page = await open();
      await page.goto(codeRequest(server.issuer, client.client_id).url);
      await loginHeading(page).waitFor();
      await expectHostsNamed(page);
      await signIn(page, user);
      await consentHeading(page).waitFor();
      await expectHostsNamed(page);
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
      expect(await page.locator('main').getByRole('link').filter({ hasNotText: /^Sign out$/ }).count(), 'no documents (the one link is Sign out)').to.equal(0);
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
      expect(() => htmlContentSecurityPolicy('n', { imgSrc: ['http://a;b'] })).to.throw();
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
      expect(await focusedId(page), 'the email is typed first').to.equal('email');
      await checkPage(page, 'login');

      await signIn(page, user, 'not-the-password');
      await page.getByRole('alert').waitFor();
      expect(await focusedId(page), 'after a wrong password, the cursor waits in the password field').to.equal('password');
      expect(await page.getByLabel('Email').inputValue(), 'the email is kept').to.equal(user.email);
      expect(await page.getByLabel('Password').getAttribute('aria-describedby'), 'the field names the error').to.equal(await page.getByRole('alert').getAttribute('id'));
      await checkPage(page, 'login-error');

      // The password typed straight away, where the cursor is, signs in.
      await page.keyboard.type(user.password);
      await page.keyboard.press('Enter');
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

    it('the home page: what the service is, the way to the settings area, the discovery documents', async function () {
      const page = await open();
      const response = await page.goto(`${server.issuer}/`);
      expect(response!.status()).to.equal(200);
      expect(await page.title()).to.equal('Workspace OAuth server');
      await page.getByRole('heading', { level: 1, name: 'Workspace OAuth server' }).waitFor();
      expect(await page.locator('img').count(), 'no logo configured: none shown').to.equal(0);
      expect(await page.getByRole('link', { name: 'Documentation' }).count(), 'no documentation configured: no link').to.equal(0);
      for (const name of ['Authorization server metadata', 'OpenID Connect discovery']) {
        const href = await page.getByRole('link', { name }).getAttribute('href');
        const document = await fetch(href!);
        expect(document.status, `${name}: ${href}`).to.equal(200);
        expect(((await document.json()) as { issuer: string }).issuer).to.equal(server.issuer);
      }
      await checkPage(page, 'home');
      await page.getByRole('link', { name: 'Sign in to your settings' }).click();
      await loginHeading(page).waitFor();
    });
  });

  describe('error pages', function () {
    /** Words of the engine's own descriptions, which are for developers and never shown. */
    const ENGINE_PHRASES = [/client is invalid/i, /did not match any of the client's registered/i, /missing required parameter/i, /\(.*\binvalid\b.*\)/i];

    async function expectPlainErrorPage(page: Page, heading: string): Promise<void> {
      await page.getByRole('heading', { level: 1, name: heading }).waitFor();
      const text = await page.locator('main').innerText();
      for (const phrase of ENGINE_PHRASES) expect(text, `no engine phrase ${phrase}`).to.not.match(phrase);
      expect(text, 'says what to do next').to.match(/Go back to the application|Try again/);
      const home = page.getByRole('link', { name: 'Go to the Workspace OAuth server home page' });
      expect(await home.getAttribute('href')).to.equal('/');
      expect(text, 'a reference to quote').to.match(/Reference: \S+/);
    }

    it('say in plain words what happened and what to do next, and link back to the home page', async function () {
      const client = await newClient();
      const page = await open();

      await page.goto(codeRequest(server.issuer, 'no-such-client').url);
      await expectPlainErrorPage(page, 'Unknown application');

      await page.goto(codeRequest(server.issuer, client.client_id, { redirect_uri: 'http://127.0.0.1:9/not-registered' }).url);
      await expectPlainErrorPage(page, 'Unregistered return address');

      await page.goto(`${server.issuer}/oauth/authorize?response_type=code`);
      await expectPlainErrorPage(page, 'Invalid request');
      await checkPage(page, 'error-invalid-request');

      await page.getByRole('link', { name: 'Go to the Workspace OAuth server home page' }).click();
      await page.getByRole('heading', { level: 1, name: 'Workspace OAuth server' }).waitFor();
    });
  });
});

describe('the service\'s name, logo and documentation (SERVICE_NAME, SERVICE_LOGO_URL, SERVICE_DOCUMENTATION_URL) on every page', function () {
  this.timeout(60_000);

  const NAME = 'Acme Sign-in';
  const DOCUMENTATION = 'https://docs.example.com/oauth';
  let certificates: TestCertificates;
  let brand: DocumentServer;
  let logos: LogoServer;
  let server: TestServer;
  // The logo's https server has the test's own certificate.
  const { open } = browserForSuite({ viewport: PHONE, ignoreHTTPSErrors: true });

  before(async function () {
    certificates = await testCertificates();
    [brand, logos] = await Promise.all([startDocumentServer(certificates), startLogoServer()]);
    const png = logoPng(64);
    brand.serve('/brand.png', (_request, response) => {
      response.writeHead(200, { 'content-type': 'image/png', 'content-length': png.length, 'cache-control': 'no-store' }).end(png);
    });
    server = await startServer({ env: { SERVICE_NAME: NAME, SERVICE_LOGO_URL: `${brand.origin}/brand.png`, SERVICE_DOCUMENTATION_URL: DOCUMENTATION } });
  });

  after(async function () {
    await server?.stop();
    await brand?.stop();
    await logos?.close();
    await certificates?.remove();
  });

  /** The header: the name, linking home, and the logo (loaded, allowed by the page's policy). */
  async function expectBrand(page: Page, response: PageResponse): Promise<void> {
    const home = page.getByRole('banner').getByRole('link', { name: NAME, exact: true });
    expect(await home.getAttribute('href')).to.equal('/');
    const logo = page.getByRole('banner').locator('img');
    expect(await logo.getAttribute('src')).to.equal(`${brand.origin}/brand.png`);
    expect(await logo.getAttribute('alt'), 'decorative: the name is beside it').to.equal('');
    await imagesSettled(page);
    expect(await logo.evaluate((image: HTMLImageElement) => image.naturalWidth), 'the logo loaded').to.be.greaterThan(0);
    expect(directives(response.headers()['content-security-policy']).get('img-src')).to.include(brand.origin);
  }

  it('shows them on the home page, the sign-in and consent pages and the error page', async function () {
    const user = await seedUser(server, [{ workspace: 'Branded Ltd' }]);
    const client = await registerClient(server.issuer, { client_name: 'Branded Client', logo_uri: logos.logoUri });
    const page = await open();

    const home = await page.goto(`${server.issuer}/`);
    expect(await page.title()).to.equal(NAME);
    await page.getByRole('heading', { level: 1, name: NAME }).waitFor();
    await expectBrand(page, home!);
    expect(await page.getByRole('link', { name: 'Documentation' }).getAttribute('href')).to.equal(DOCUMENTATION);
    await checkPage(page, 'home-branded');

    const login = await page.goto(codeRequest(server.issuer, client.client_id).url);
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await expectBrand(page, login!);
    expect(directives(login!.headers()['content-security-policy']).get('img-src'), 'the service\'s logo and the application\'s').to.have.members([brand.origin, logos.origin]);
    await checkPage(page, 'login-branded');
    await signIn(page, user);
    await page.getByRole('heading', { level: 1, name: /^Authorize/ }).waitFor();
    expect(await page.getByRole('banner').innerText()).to.include(NAME);

    const error = await page.goto(codeRequest(server.issuer, 'no-such-client').url);
    await page.getByRole('heading', { level: 1, name: 'Unknown application' }).waitFor();
    await expectBrand(page, error!);
    expect(await page.getByRole('link', { name: `Go to the ${NAME} home page` }).getAttribute('href')).to.equal('/');
  });
});
