import { expect } from 'chai';
import * as oauth from 'oauth4webapi';

import { REDIRECT_URI, codeRequest, exchangeCode, registerClient, type RegisteredClient } from '../support/oauth.ts';
import { expectOAuthError } from '../support/oauth_errors.ts';
import { registerVettedClient, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';
import { eventually } from '../support/wait.ts';

const insecure = { [oauth.allowInsecureRequests]: true };

interface PushedRequest {
  request_uri: string;
  expires_in: number;
}

/** POST /oauth/par with client_secret_post credentials (none for a public client). */
function push(server: TestServer, client: RegisteredClient, params: Record<string, string>): Promise<Response> {
  return fetch(`${server.issuer}/oauth/par`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ client_id: client.client_id, ...(client.client_secret ? { client_secret: client.client_secret } : {}), ...params }),
  });
}

/** The authorization request that only names the pushed one. */
function byReference(server: TestServer, client: RegisteredClient, requestUri: string): string {
  return `${server.issuer}/oauth/authorize?${new URLSearchParams({ client_id: client.client_id, request_uri: requestUri })}`;
}

/** Pushed authorization requests (RFC 9126) at /oauth/par. */
describe('pushed authorization requests (POST /oauth/par)', function () {
  this.timeout(60_000);

  describe('by default: offered, required of the clients registered to require them', () => {
    let server: TestServer;
    let user: SeededUser;
    let client: RegisteredClient;

    before(async () => {
      server = await startServer({ env: { RATE_LIMIT_TOKEN_ADDRESS: '12/1m' } });
      user = await seedUser(server);
      client = await registerClient(server.issuer, { client_name: 'Pushing App' });
    });

    after(async () => {
      await server?.stop();
    });

    const signIn = () => ({ email: user.email, password: user.password });

    it('is advertised in discovery, and not required of every client', async () => {
      for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
        const metadata = await (await fetch(`${server.issuer}${path}`)).json() as Record<string, unknown>;
        expect(metadata.pushed_authorization_request_endpoint, path).to.equal(`${server.issuer}/oauth/par`);
        // RFC 9126 section 5: absent means false.
        expect(metadata.require_pushed_authorization_requests ?? false, path).to.equal(false);
      }
    });

    it('takes a pushed request from a stock client (oauth4webapi), and the authorization that names it gives a code that redeems', async () => {
      const issuer = new URL(server.issuer);
      const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
      const verifier = oauth.generateRandomCodeVerifier();
      const state = oauth.generateRandomState();
      const pushed = await oauth.processPushedAuthorizationResponse(as, { client_id: client.client_id }, await oauth.pushedAuthorizationRequest(
        as, { client_id: client.client_id }, oauth.ClientSecretPost(client.client_secret!), {
          response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api profile', state, code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
        }, insecure,
      ));
      expect(pushed.request_uri).to.match(/^urn:ietf:params:oauth:request_uri:/);
      expect(pushed.expires_in, 'short-lived').to.be.within(1, 60);

      const callback = await authorize(new UserAgent(), byReference(server, client, pushed.request_uri), server.origin, signIn());
      const params = oauth.validateAuthResponse(as, { client_id: client.client_id }, callback, state);
      const tokens = await oauth.processAuthorizationCodeResponse(as, { client_id: client.client_id }, await oauth.authorizationCodeGrantRequest(
        as, { client_id: client.client_id }, oauth.ClientSecretPost(client.client_secret!), params, REDIRECT_URI, verifier, insecure,
      ));
      expect(tokens.access_token).to.be.a('string');
      expect(tokens.refresh_token).to.be.a('string');
    });

    it('uses a request_uri once: the second authorization that names it gets no code', async () => {
      const { params, verifier } = codeRequest(server.issuer, client.client_id);
      const response = await push(server, client, params);
      expect(response.status).to.equal(201);
      const { request_uri: requestUri } = await response.json() as PushedRequest;
      const first = await authorize(new UserAgent(), byReference(server, client, requestUri), server.origin, signIn());
      expect((await exchangeCode(server.issuer, client, first.searchParams.get('code')!, verifier)).status).to.equal(200);

      const again = await new UserAgent().follow(byReference(server, client, requestUri), server.origin);
      expect(again.url, 'no redirect with a code').to.not.include('code=');
      expect(again.response.status).to.equal(400);
      const page = await again.response.text();
      expect(page).to.not.include('Sign in');
      expect(page, 'the page says why, and not that the server failed').to.include('This sign-in request has expired');

      // Not a pushed request's reference at all: the application's fault, said so, not the server's.
      const foreign = await new UserAgent().follow(byReference(server, client, 'https://elsewhere.example/request'), server.origin);
      expect(foreign.response.status).to.equal(400);
      const foreignPage = await foreign.response.text();
      expect(foreignPage).to.include('The application sent a request this server cannot process').and.not.include('Something went wrong');
    });

    it('refuses what it would refuse at the authorization endpoint, and an unauthenticated push, with the RFC\'s errors', async () => {
      const { params } = codeRequest(server.issuer, client.client_id);
      const wrongSecret = await push(server, { ...client, client_secret: 'not the secret' }, params);
      expect(wrongSecret.headers.get('www-authenticate'), 'a 401 has its challenge').to.match(/^Basic /);
      await expectOAuthError(wrongSecret, 401, 'invalid_client');
      const { client_id: _unauthenticated, ...withoutClient } = params;
      const anonymous = await fetch(`${server.issuer}/oauth/par`, { method: 'POST', body: new URLSearchParams(withoutClient) });
      expect(anonymous.headers.get('www-authenticate')).to.match(/^Basic /);
      await expectOAuthError(anonymous, 401, 'invalid_client');
      await expectOAuthError(await push(server, client, { ...params, redirect_uri: 'https://elsewhere.example/callback' }), 400, 'invalid_request');
      const nested = await expectOAuthError(await push(server, client, { ...params, request_uri: 'urn:ietf:params:oauth:request_uri:nested' }), 400, 'request_uri_not_supported');
      expect(nested.error_description, 'what to do instead').to.match(/push the parameters themselves/);
      await expectOAuthError(await push(server, client, { ...params, scope: 'api admin' }), 400, 'invalid_scope');
    });

    it('answers a request_uri at the authorization endpoint that is not a pushed request\'s with request_uri_not_supported saying what to send instead', async () => {
      const vetted = await registerVettedClient(server, { client_name: 'Referencing App' });
      const url = new URL(codeRequest(server.issuer, vetted.client_id).url);
      url.searchParams.set('request_uri', 'https://app.example/request.jwt');
      const answer = await new UserAgent().follow(url.href, server.origin);
      const callback = new URL(answer.url);
      expect(`${callback.origin}${callback.pathname}`, answer.url).to.equal(REDIRECT_URI);
      expect(callback.searchParams.get('error')).to.equal('request_uri_not_supported');
      expect(callback.searchParams.get('error_description')).to.match(/^request_uri is taken only at the authorization endpoint, as the urn:ietf:params:oauth:request_uri: value/);
    });

    it('holds a client registered with require_pushed_authorization_requests to it: its plain authorization request gets no code', async () => {
      const strict = await registerClient(server.issuer, { client_name: 'Strict App', require_pushed_authorization_requests: true });
      expect(strict.require_pushed_authorization_requests).to.equal(true);
      const plain = codeRequest(server.issuer, strict.client_id);
      const refused = await new UserAgent().follow(plain.url, server.origin);
      const callback = new URL(refused.url);
      if (refused.url.startsWith(REDIRECT_URI)) {
        expect(callback.searchParams.get('error')).to.equal('invalid_request');
        expect(callback.searchParams.get('code')).to.equal(null);
      } else {
        expect(refused.response.status).to.equal(400);
      }

      const pushed = await push(server, strict, plain.params);
      expect(pushed.status).to.equal(201);
      const { request_uri: requestUri } = await pushed.json() as PushedRequest;
      const code = (await authorize(new UserAgent(), byReference(server, strict, requestUri), server.origin, signIn())).searchParams.get('code');
      expect((await exchangeCode(server.issuer, strict, code!, plain.verifier)).status).to.equal(200);
    });

    it('is rate limited like the token endpoint: past the limit per address, 429 with Retry-After in the OAuth error shape', async () => {
      const { params } = codeRequest(server.issuer, client.client_id);
      let refused: Response | undefined;
      for (let attempt = 0; attempt < 20 && !refused; attempt += 1) {
        const response = await push(server, client, params);
        if (response.status === 429) refused = response;
        else expect(response.status).to.equal(201);
      }
      expect(refused, 'a push refused within 20').to.not.equal(undefined);
      expect(Number(refused!.headers.get('retry-after'))).to.be.greaterThan(0);
      const body = await expectOAuthError(refused!, 429, 'temporarily_unavailable');
      expect(body.error_description).to.match(/pushed authorization requests/);
    });
  });

  describe('with PAR_REQUIRED=on', () => {
    let server: TestServer;
    let user: SeededUser;
    let client: RegisteredClient;

    before(async () => {
      server = await startServer({ env: { PAR_REQUIRED: 'on' } });
      user = await seedUser(server);
      client = await registerClient(server.issuer, { client_name: 'Any App', token_endpoint_auth_method: 'none' });
    });

    after(async () => {
      await server?.stop();
    });

    it('says so in discovery, gives no code for a plain request, and serves a pushed one from a public client', async () => {
      const metadata = await (await fetch(`${server.issuer}/.well-known/oauth-authorization-server`)).json() as Record<string, unknown>;
      expect(metadata.require_pushed_authorization_requests).to.equal(true);

      const plain = codeRequest(server.issuer, client.client_id);
      const refused = await new UserAgent().follow(plain.url, server.origin);
      expect(new URL(refused.url).searchParams.get('code')).to.equal(null);

      const pushed = await push(server, client, plain.params);
      expect(pushed.status).to.equal(201);
      const { request_uri: requestUri } = await pushed.json() as PushedRequest;
      const code = (await authorize(new UserAgent(), byReference(server, client, requestUri), server.origin, { email: user.email, password: user.password })).searchParams.get('code');
      expect((await exchangeCode(server.issuer, client, code!, plain.verifier)).status).to.equal(200);
    });

    it('holds a client registered before the setting to it, and still lets people sign in to the settings area (the service\'s own client)', async () => {
      const earlier = await startServer();
      const older = await registerClient(earlier.issuer, { client_name: 'Older App', token_endpoint_auth_method: 'none' });
      // The same store, served with PAR_REQUIRED=on.
      const later = await startServer({ store: earlier.store, env: { PAR_REQUIRED: 'on' } });
      try {
        const plain = codeRequest(later.issuer, older.client_id);
        const refused = await new UserAgent().follow(plain.url, later.origin);
        // An application that registered itself gets the error on the server's page (held, not redirected).
        expect(refused.url, 'not sent on to sign in').to.not.contain('/interaction/');
        expect(new URL(refused.url).searchParams.get('code')).to.equal(null);
        await eventually('the refusal in the log', () => later.logs().includes('Pushed Authorization Request must be used') || undefined, 5_000);

        const signIn = await new UserAgent().follow(`${later.issuer}/settings`, later.origin);
        expect(signIn.response.status).to.equal(200);
        expect(await signIn.response.text()).to.match(/<form method="post"/);
      } finally {
        await later.stop();
        await earlier.stop();
      }
    });
  });
});
