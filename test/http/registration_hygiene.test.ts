import { expect } from 'chai';

import { REDIRECT_URI, codeRequest, management, register, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { registerVettedClient, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent } from '../support/user_agent.ts';

interface Json { [key: string]: unknown }

/** Registration hygiene: what anyone may register is bounded, clean, and labelled for what it is. */
describe('registration hygiene', function () {
  this.timeout(30_000);

  let server: TestServer;
  let user: SeededUser;

  before(async () => {
    server = await startServer();
    user = await seedUser(server);
  });

  after(async () => {
    await server?.stop();
  });

  async function expectRefused(response: Response, description: RegExp, status = 400, error = 'invalid_client_metadata'): Promise<void> {
    const text = await response.text();
    expect(response.status, text).to.equal(status);
    const body = JSON.parse(text) as Json;
    expect(body.error).to.equal(error);
    expect(body.error_description).to.match(description);
  }

  describe('sizes', () => {
    it('refuses a client_name longer than 100 characters, and accepts one of exactly 100', async () => {
      await expectRefused(await register(server.issuer, { client_name: 'a'.repeat(101) }), /client_name.*100/);
      expect((await register(server.issuer, { client_name: 'a'.repeat(100) })).status).to.equal(201);
    });

    it('refuses more than 20 redirect URIs', async () => {
      const uris = Array.from({ length: 21 }, (_, i) => `https://app.example.com/cb${i}`);
      await expectRefused(await register(server.issuer, { redirect_uris: uris }), /redirect_uris.*at most 20/, 400, 'invalid_redirect_uri');
      expect((await register(server.issuer, { redirect_uris: uris.slice(0, 20) })).status).to.equal(201);
    });

    it('refuses a URI longer than 2000 characters', async () => {
      await expectRefused(await register(server.issuer, { redirect_uris: [`https://app.example.com/${'a'.repeat(2000)}`] }), /2000 characters/, 400, 'invalid_redirect_uri');
      await expectRefused(await register(server.issuer, { logo_uri: `https://app.example.com/${'a'.repeat(2000)}.png` }), /logo_uri.*2000/);
    });

    it('refuses a body over 16 KiB with 413 before reading it, at registration and at an RFC 7592 update', async () => {
      const padding = { software_statement_note: 'x'.repeat(17 * 1024) };
      await expectRefused(await register(server.issuer, padding), /larger than 16 KiB/, 413, 'invalid_request');
      const client = await registerClient(server.issuer);
      const update = await management(client.registration_client_uri, client.registration_access_token, 'PUT', {
        client_id: client.client_id, redirect_uris: client.redirect_uris, ...padding,
      });
      await expectRefused(update, /larger than 16 KiB/, 413, 'invalid_request');
      const unchanged = await management(client.registration_client_uri, client.registration_access_token);
      expect(unchanged.status, 'the registration access token still works: nothing was processed').to.equal(200);
    });

    it('refuses a registration body over 16 KiB sent without a length (chunked) with 413 too, and stores nothing', async () => {
      const uris = Array.from({ length: 20 }, (_, i) => `https://app.example.com/${i}/${'a'.repeat(1900)}`);
      const json = JSON.stringify({ client_name: 'Chunked Giant', redirect_uris: uris });
      expect(json.length).to.be.within(17 * 1024, 56 * 1024);
      const chunked = (text: string) => new ReadableStream<Uint8Array>({
        start(controller) {
          for (let at = 0; at < text.length; at += 4096) controller.enqueue(new TextEncoder().encode(text.slice(at, at + 4096)));
          controller.close();
        },
      });
      const response = await fetch(`${server.issuer}/oauth/register`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: chunked(json), duplex: 'half',
      } as RequestInit);
      await expectRefused(response, /larger than 16 KiB/, 413, 'invalid_request');
      const small = await fetch(`${server.issuer}/oauth/register`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: chunked(JSON.stringify({ client_name: 'Chunked Small', redirect_uris: uris.slice(0, 1).map((uri) => uri.slice(0, 60)) })), duplex: 'half',
      } as RequestInit);
      expect(small.status, 'a small body sent the same way registers').to.equal(201);
    });
  });

  describe('URIs', () => {
    const refused: Array<[string, string, RegExp]> = [
      ['a NUL character', 'https://app.example.com/c\u0000b', /whitespace or control/],
      ['a tab (which URL parsing would silently drop)', 'https://app.example.com/c\tb', /whitespace or control/],
      ['a newline', 'https://app.example.com/cb\n', /whitespace or control/],
      ['a space', 'https://app.example.com/c b', /whitespace or control/],
      ['a no-break space', 'https://app.example.com/c\u00a0b', /whitespace or control/],
      ['a user name and password', 'https://user:secret@app.example.com/cb', /userinfo/],
      ['a host that reads as another (bank@evil)', 'https://bank.example.com@evil.example/cb', /userinfo/],
      ['an empty userinfo', 'https://@app.example.com/cb', /userinfo/],
      ['port 0', 'https://app.example.com:0/cb', /port 0/],
    ];
    for (const [label, uri, description] of refused) {
      it(`refuses a redirect URI with ${label}`, async () => {
        await expectRefused(await register(server.issuer, { redirect_uris: [uri] }), description, 400, 'invalid_redirect_uri');
      });
    }

    it('applies the same rules to the other URLs a page shows or a browser is sent to', async () => {
      await expectRefused(await register(server.issuer, { logo_uri: 'https://user@cdn.example.com/logo.png' }), /logo_uri.*userinfo/);
      await expectRefused(await register(server.issuer, { policy_uri: 'https://app.example.com/pol icy' }), /policy_uri/);
    });

    it('refuses them in an RFC 7592 update too, and keeps the client as it was', async () => {
      const client = await registerClient(server.issuer);
      const update = await management(client.registration_client_uri, client.registration_access_token, 'PUT', {
        client_id: client.client_id, redirect_uris: [REDIRECT_URI, 'https://a@b.example/cb'],
      });
      await expectRefused(update, /userinfo/, 400, 'invalid_redirect_uri');
      const read = await management(client.registration_client_uri, client.registration_access_token);
      expect((await read.json() as Json).redirect_uris).to.deep.equal([REDIRECT_URI]);
    });
  });

  describe('client names', () => {
    it('strips bidirectional-override characters, so a name cannot read backwards on the pages', async () => {
      const response = await register(server.issuer, { client_name: 'Invoice \u202Efdp.exe\u202C Viewer \u2066x\u2069' });
      expect(response.status).to.equal(201);
      const client = await response.json() as RegisteredClient;
      expect(client.client_name).to.equal('Invoice fdp.exe Viewer x');
      const read = await management(client.registration_client_uri, client.registration_access_token);
      expect((await read.json() as Json).client_name).to.equal('Invoice fdp.exe Viewer x');
    });

    it('strips characters that show nothing, so two names that read alike are alike', async () => {
      const client = await registerClient(server.issuer, { client_name: 'Pay\u200Bpal\u2060 Checkout\uFEFF' });
      expect(client.client_name).to.equal('Paypal Checkout');
      const blank = await registerClient(server.issuer, { client_name: '\u200B\u3164' });
      expect(blank).to.not.have.property('client_name');
    });

    it('refuses a name stacking dozens of combining marks on a letter, which draw over the page around it; takes the few real scripts stack', async () => {
      await expectRefused(await register(server.issuer, { client_name: `A${'\u0359'.repeat(49)}pp` }), /client_name must not stack more than 6 combining marks/);
      for (const name of ['Vi\u1EC7t Nam'.normalize('NFD'), '\u0E01\u0E35\u0E48', '\u05E9\u05BC\u05C1\u05B8\u0591']) {
        expect((await register(server.issuer, { client_name: name })).status, JSON.stringify(name)).to.equal(201);
      }
    });

    it('refuses control characters in a name', async () => {
      await expectRefused(await register(server.issuer, { client_name: 'Good\u0007App' }), /client_name.*control/);
    });
  });

  describe('loopback redirect URIs (RFC 8252 section 7.3)', () => {
    it('make a native client when application_type is not given, and an https one stays a web client', async () => {
      const loopback = await registerClient(server.issuer, { application_type: undefined, redirect_uris: ['http://127.0.0.1/callback'] });
      expect(loopback.application_type).to.equal('native');
      const web = await registerClient(server.issuer, { application_type: undefined, redirect_uris: ['https://app.example.com/cb'] });
      expect(web.application_type).to.equal('web');
      const declared = await registerClient(server.issuer, { application_type: 'web', redirect_uris: ['http://127.0.0.1/callback'] });
      expect(declared.application_type, 'an explicit choice is kept').to.equal('web');
      const privateUse = await registerClient(server.issuer, { application_type: undefined, redirect_uris: ['http://localhost/callback', 'com.example.app:/callback'], token_endpoint_auth_method: 'none' });
      expect(privateUse.application_type, 'loopback and private-use together').to.equal('native');
    });

    it('make a client with an https redirect URI too a web client, whose loopback URIs match exactly, port included', async () => {
      const mixed = await registerClient(server.issuer, { application_type: undefined, redirect_uris: ['https://app.example.com/cb', 'http://127.0.0.1:8080/callback'] });
      expect(mixed.application_type).to.equal('web');
      const landing = (redirectUri: string) => new UserAgent().follow(codeRequest(server.issuer, mixed.client_id, { redirect_uri: redirectUri }).url, server.origin);
      const registered = await landing('http://127.0.0.1:8080/callback');
      expect(registered.response.status).to.equal(200);
      expect(await registered.response.text()).to.include('name="password"');
      const otherPort = await landing('http://127.0.0.1:49152/callback');
      expect(otherPort.response.status).to.equal(400);
      expect(await otherPort.response.text()).to.include('redirect_uri');
    });

    it('accept any port for a native client, and only the registered one for a web client', async () => {
      const native = await registerClient(server.issuer, { application_type: undefined, redirect_uris: ['http://127.0.0.1/callback'] });
      const web = await registerClient(server.issuer, { application_type: 'web', redirect_uris: ['http://127.0.0.1/callback'] });
      const onEphemeralPort = (client: RegisteredClient) => codeRequest(server.issuer, client.client_id, { redirect_uri: 'http://127.0.0.1:49152/callback' }).url;

      const nativeLanding = await new UserAgent().follow(onEphemeralPort(native), server.origin);
      expect(nativeLanding.response.status).to.equal(200);
      expect(await nativeLanding.response.text()).to.include('name="password"');

      const webLanding = await new UserAgent().follow(onEphemeralPort(web), server.origin);
      expect(webLanding.response.status).to.equal(400);
      expect(await webLanding.response.text()).to.include('redirect_uri');
    });
  });

  describe('the consent page', () => {
    /** Signs in and returns the consent page's HTML. */
    async function consentPage(client: RegisteredClient): Promise<string> {
      const agent = new UserAgent();
      const { response } = await agent.follow(codeRequest(server.issuer, client.client_id).url, server.origin);
      const login = await response.text();
      const action = /<form method="post" action="([^"]+)"/.exec(login)![1]!;
      const csrf = /name="csrf" value="([^"]*)"/.exec(login)![1]!;
      const posted = await agent.request(new URL(action, server.origin).href, { form: { csrf, email: user.email, password: user.password } });
      const { response: consent } = await agent.follow(new URL(posted.headers.get('location')!, server.origin).href, server.origin);
      const html = await consent.text();
      expect(html).to.include('name="decision"');
      return html;
    }

    it('says when an application registered itself and no administrator checked it', async () => {
      const html = await consentPage(await registerClient(server.issuer, { client_name: 'Self Made' }));
      expect(html).to.match(/registered itself with this service\. No administrator has checked it/);
    });

    it('does not say so for an application an operator let in', async () => {
      const html = await consentPage(await registerVettedClient(server, { client_name: 'Vetted Partner' }));
      expect(html).to.not.include('registered itself');
    });

    it('links the application\'s own web page (client_uri, RFC 7591 section 2), naming its host', async () => {
      const html = await consentPage(await registerClient(server.issuer, { client_name: 'With Website', client_uri: 'https://app.example/about' }));
      expect(html).to.include('<a href="https://app.example/about" rel="noopener noreferrer">Website (app.example)</a>');
    });

    it('says so on the sign-in page before it too, where the application\'s name and logo are shown first; not for one an operator let in', async () => {
      const signInPage = async (client: RegisteredClient) => (await (await new UserAgent().follow(codeRequest(server.issuer, client.client_id).url, server.origin)).response.text());
      const unvetted = await signInPage(await registerClient(server.issuer, { client_name: 'Self Made Too' }));
      expect(unvetted).to.include('name="password"').and.match(/registered itself with this service\. No administrator has checked it, and its name is the one it chose\. Sign in only if/);
      const vetted = await signInPage(await registerVettedClient(server, { client_name: 'Vetted Partner Too' }));
      expect(vetted).to.include('name="password"').and.not.include('registered itself');
    });
  });
});
