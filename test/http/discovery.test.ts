import { expect } from 'chai';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';

import { REDIRECT_URI, codeRequest, registerClient } from '../support/oauth.ts';
import { seedUser, startServer, type TestServer } from '../support/server.ts';
import { UserAgent, authorize } from '../support/user_agent.ts';

/**
 * Server metadata discovery (RFC 8414, OpenID Connect Discovery): what is advertised is exactly
 * what is enabled, every advertised endpoint answers, and an issuer with a path works as well.
 */

type Metadata = Record<string, unknown>;

const ENDPOINTS: Record<string, string> = {
  authorization_endpoint: '/oauth/authorize',
  token_endpoint: '/oauth/token',
  registration_endpoint: '/oauth/register',
  jwks_uri: '/oauth/jwks',
  revocation_endpoint: '/oauth/revoke',
  introspection_endpoint: '/oauth/introspect',
  userinfo_endpoint: '/oauth/userinfo',
  end_session_endpoint: '/oauth/logout',
};

/** RFC 7517 section 8.5.1, or plain JSON. */
const JWK_SET = /^application\/(jwk-set\+)?json/;

const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

async function getJson(url: string, contentType = /^application\/json/): Promise<{ response: Response; body: Metadata }> {
  const response = await fetch(url);
  expect(response.status, `GET ${url}`).to.equal(200);
  expect(response.headers.get('content-type')).to.match(contentType);
  return { response, body: await response.json() as Metadata };
}

function expectMetadataFor(doc: Metadata, issuer: string): void {
  expect(doc.issuer).to.equal(issuer);
  for (const [name, path] of Object.entries(ENDPOINTS)) {
    expect(doc[name], name).to.equal(`${issuer}${path}`);
  }
  expect(doc.response_types_supported).to.deep.equal(['code']);
  expect(doc.grant_types_supported).to.have.members(['authorization_code', 'refresh_token', 'client_credentials']);
  expect(doc.code_challenge_methods_supported).to.deep.equal(['S256']);
  expect(doc.scopes_supported).to.include.members(['api', 'profile', 'openid']);
  expect(doc.token_endpoint_auth_methods_supported).to.include.members(['client_secret_post', 'client_secret_basic', 'none']);
  expect(doc.authorization_response_iss_parameter_supported).to.equal(true);
}

describe('discovery', () => {
  let server: TestServer;
  let pathServer: TestServer;

  before(async () => {
    [server, pathServer] = await Promise.all([startServer(), startServer({ basePath: '/auth' })]);
  });

  after(async () => {
    await Promise.all([server?.stop(), pathServer?.stop()]);
  });

  describe('issuer at the host root', () => {
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      it(`GET ${path} describes this issuer and its endpoints under /oauth/`, async () => {
        const { body } = await getJson(`${server.origin}${path}`);
        expectMetadataFor(body, server.issuer);
      });
    }

    it('publishes the same document at both well-known addresses', async () => {
      const { body: rfc8414 } = await getJson(`${server.issuer}/.well-known/oauth-authorization-server`);
      const { body: oidc } = await getJson(`${server.issuer}/.well-known/openid-configuration`);
      expect(rfc8414).to.deep.equal(oidc);
    });

    it('advertises nothing that is not enabled', async () => {
      const { body } = await getJson(`${server.issuer}/.well-known/oauth-authorization-server`);
      for (const absent of [
        'check_session_iframe',
        'frontchannel_logout_supported',
        'backchannel_logout_supported',
        'device_authorization_endpoint',
        'backchannel_authentication_endpoint',
      ]) {
        expect(body, absent).not.to.have.property(absent);
      }
      const responseTypes = body.response_types_supported as string[];
      for (const type of responseTypes) {
        expect(type.split(' ')).not.to.include('token');
        expect(type.split(' ')).not.to.include('id_token');
      }
      expect(body.grant_types_supported).not.to.include('implicit');
      expect(body.grant_types_supported).not.to.include('password');
      expect(body.code_challenge_methods_supported).not.to.include('plain');
    });

    it('advertises DPoP (RFC 9449) with the algorithms proofs may be signed with', async () => {
      const { body } = await getJson(`${server.issuer}/.well-known/oauth-authorization-server`);
      expect(body.dpop_signing_alg_values_supported).to.deep.equal(['ES256', 'PS256', 'EdDSA', 'Ed25519']);
    });

    it('is accepted by oauth4webapi (discoveryRequest + processDiscoveryResponse)', async () => {
      const issuer = new URL(server.issuer);
      for (const algorithm of ['oauth2', 'oidc'] as const) {
        const response = await oauth.discoveryRequest(issuer, { algorithm, [oauth.allowInsecureRequests]: true });
        const as = await oauth.processDiscoveryResponse(issuer, response);
        expect(as.issuer, algorithm).to.equal(server.issuer);
        expect(as.token_endpoint).to.equal(`${server.issuer}/oauth/token`);
        expect(as.registration_endpoint).to.equal(`${server.issuer}/oauth/register`);
        expect(as.code_challenge_methods_supported).to.deep.equal(['S256']);
      }
    });

    it('is accepted by openid-client discovery', async () => {
      const config = await client.discovery(new URL(server.issuer), 'any-client-id', undefined, undefined, {
        execute: [client.allowInsecureRequests],
      });
      const metadata = config.serverMetadata();
      expect(metadata.issuer).to.equal(server.issuer);
      expect(metadata.authorization_endpoint).to.equal(`${server.issuer}/oauth/authorize`);
      expect(metadata.supportsPKCE('S256')).to.equal(true);
      expect(metadata.supportsPKCE('plain')).to.equal(false);
    });

    it('jwks_uri serves public signing keys only: an EC P-256 key and an RSA key, no private members', async () => {
      const { body: metadata } = await getJson(`${server.issuer}/.well-known/oauth-authorization-server`);
      const { body } = await getJson(metadata.jwks_uri as string, JWK_SET);
      const keys = body.keys as Array<Record<string, unknown>>;
      expect(keys).to.be.an('array').that.is.not.empty;
      expect(keys.some((key) => key.kty === 'EC' && key.crv === 'P-256')).to.equal(true);
      expect(keys.some((key) => key.kty === 'RSA')).to.equal(true);
      for (const key of keys) {
        for (const member of PRIVATE_JWK_MEMBERS) expect(key, `${String(key.kid)} ${member}`).not.to.have.property(member);
        expect(key.kid).to.be.a('string').that.is.not.empty;
      }
      const kids = keys.map((key) => key.kid);
      expect(new Set(kids).size).to.equal(kids.length);
    });

    it('token, revocation and introspection endpoints answer an unauthenticated empty POST with 401 invalid_client, not 404', async () => {
      const { body: metadata } = await getJson(`${server.issuer}/.well-known/oauth-authorization-server`);
      for (const name of ['token_endpoint', 'revocation_endpoint', 'introspection_endpoint']) {
        const response = await fetch(metadata[name] as string, { method: 'POST' });
        // RFC 6749 5.2: "no client authentication included" is invalid_client.
        expect(response.status, name).to.equal(401);
        expect(response.headers.get('content-type'), name).to.match(/^application\/json/);
        const body = await response.json() as Metadata;
        expect(body.error, name).to.equal('invalid_client');
        expect(body.error_description, name).to.be.a('string').that.is.not.empty;
      }
    });

    it('token, revocation and introspection endpoints: every refusal is no-store, and a body sent without a Content-Type is named as the problem', async () => {
      const { body: metadata } = await getJson(`${server.issuer}/.well-known/oauth-authorization-server`);
      for (const name of ['token_endpoint', 'revocation_endpoint', 'introspection_endpoint']) {
        const url = metadata[name] as string;
        const unauthenticated = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'token=x&grant_type=client_credentials' });
        expect([unauthenticated.status, unauthenticated.headers.get('cache-control')], name).to.deep.equal([401, 'no-store']);
        const untyped = await fetch(url, { method: 'POST', body: new TextEncoder().encode('token=x&grant_type=client_credentials&client_id=a&client_secret=b') });
        const body = await untyped.json() as Metadata;
        expect([untyped.status, body.error], `${name}: ${body.error_description}`).to.deep.equal([400, 'invalid_request']);
        expect(body.error_description, name).to.match(/application\/x-www-form-urlencoded/);
        expect(untyped.headers.get('cache-control'), name).to.equal('no-store');
      }
    });

    it('lists the algorithms a private_key_jwt assertion may be signed with wherever it lists private_key_jwt (RFC 8414 section 2)', async () => {
      const { body } = await getJson(`${server.issuer}/.well-known/oauth-authorization-server`);
      for (const endpoint of ['token_endpoint', 'revocation_endpoint', 'introspection_endpoint']) {
        expect(body[`${endpoint}_auth_methods_supported`], endpoint).to.include('private_key_jwt');
        expect(body[`${endpoint}_auth_signing_alg_values_supported`], endpoint).to.deep.equal(['ES256', 'PS256', 'EdDSA', 'RS256']);
      }
    });

    it('registration endpoint answers an empty registration with a 400 JSON error', async () => {
      const { body: metadata } = await getJson(`${server.issuer}/.well-known/oauth-authorization-server`);
      const response = await fetch(metadata.registration_endpoint as string, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}',
      });
      expect(response.status).to.equal(400);
      const body = await response.json() as Metadata;
      expect(body.error).to.be.oneOf(['invalid_redirect_uri', 'invalid_client_metadata']);
    });

    it('userinfo endpoint answers a request without a token with 401 and WWW-Authenticate: Bearer', async () => {
      const { body: metadata } = await getJson(`${server.issuer}/.well-known/oauth-authorization-server`);
      const response = await fetch(metadata.userinfo_endpoint as string);
      expect(response.status).to.equal(401);
      expect(response.headers.get('www-authenticate')).to.match(/^Bearer\b/);
    });

    it('authorization endpoint answers a request without parameters with 400, not 404', async () => {
      const { body: metadata } = await getJson(`${server.issuer}/.well-known/oauth-authorization-server`);
      const response = await fetch(metadata.authorization_endpoint as string, { redirect: 'manual' });
      expect(response.status).to.equal(400);
    });

    it('GET /healthz is 200', async () => {
      const response = await fetch(`${server.origin}/healthz`);
      expect(response.status).to.equal(200);
    });

    it('GET /readyz is 200 with the store answering and the keys loaded; probes stay out of the info log', async () => {
      const response = await fetch(`${server.origin}/readyz`);
      expect(response.status).to.equal(200);
      expect(response.headers.get('cache-control')).to.equal('no-store');
      expect(await response.json()).to.deep.equal({ status: 'ready', store: 'ok', keys: 'loaded' });
      await fetch(`${server.origin}/.well-known/openid-configuration`);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(server.logs(), 'other requests are logged').to.contain('"path":"/.well-known/openid-configuration"');
      expect(server.logs()).to.not.contain('"path":"/readyz"').and.not.contain('"path":"/healthz"');
    });
  });

  describe('issuer with a path (BASE_URL .../auth)', () => {
    it('serves RFC 8414 metadata at /.well-known/oauth-authorization-server/auth', async () => {
      expect(pathServer.issuer).to.equal(`${pathServer.origin}/auth`);
      const { body } = await getJson(`${pathServer.origin}/.well-known/oauth-authorization-server/auth`);
      expect(body.issuer).to.equal(`${pathServer.origin}/auth`);
      expectMetadataFor(body, `${pathServer.origin}/auth`);
      for (const name of Object.keys(ENDPOINTS)) {
        expect(body[name] as string, name).to.match(new RegExp(`^${pathServer.origin.replace(/[.]/g, '\\.')}/auth/oauth/`));
      }
    });

    it('serves OpenID Connect discovery at /auth/.well-known/openid-configuration', async () => {
      const { body } = await getJson(`${pathServer.origin}/auth/.well-known/openid-configuration`);
      expectMetadataFor(body, `${pathServer.origin}/auth`);
    });

    it('is accepted by oauth4webapi (RFC 8414 path insertion) and openid-client', async () => {
      const issuer = new URL(pathServer.issuer);
      const as = await oauth.processDiscoveryResponse(
        issuer,
        await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', [oauth.allowInsecureRequests]: true }),
      );
      expect(as.issuer).to.equal(pathServer.issuer);
      expect(as.token_endpoint).to.equal(`${pathServer.issuer}/oauth/token`);

      const config = await client.discovery(issuer, 'any-client-id', undefined, undefined, {
        execute: [client.allowInsecureRequests],
      });
      expect(config.serverMetadata().issuer).to.equal(pathServer.issuer);
    });

    it('jwks under the path serves the keys', async () => {
      const { body } = await getJson(`${pathServer.issuer}/oauth/jwks`, JWK_SET);
      expect(body.keys).to.be.an('array').that.is.not.empty;
    });

    it('runs a full authorization-code flow with PKCE on the advertised endpoints', async () => {
      const issuer = new URL(pathServer.issuer);
      const as = await oauth.processDiscoveryResponse(
        issuer,
        await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', [oauth.allowInsecureRequests]: true }),
      );
      expect(as.registration_endpoint).to.equal(`${pathServer.issuer}/oauth/register`);
      const registered = await registerClient(pathServer.issuer);
      const user = await seedUser(pathServer, [{ workspace: 'Path Workspace' }]);
      const { url, state, verifier } = codeRequest(pathServer.issuer, registered.client_id);
      expect(url.startsWith(as.authorization_endpoint!)).to.equal(true);

      const callback = await authorize(new UserAgent(), url, pathServer.origin, { email: user.email, password: user.password });
      expect(`${callback.origin}${callback.pathname}`).to.equal(REDIRECT_URI);
      expect(callback.searchParams.get('iss')).to.equal(pathServer.issuer);
      expect(callback.searchParams.get('state')).to.equal(state);

      const oauthClient: oauth.Client = { client_id: registered.client_id };
      const clientAuth = oauth.ClientSecretPost(registered.client_secret!);
      const params = oauth.validateAuthResponse(as, oauthClient, callback, state);
      const tokenResponse = await oauth.authorizationCodeGrantRequest(as, oauthClient, clientAuth, params, REDIRECT_URI, verifier, {
        [oauth.allowInsecureRequests]: true,
      });
      const tokens = await oauth.processAuthorizationCodeResponse(as, oauthClient, tokenResponse);
      expect(tokens.token_type).to.equal('bearer');
      expect(tokens.expires_in).to.equal(3600);
      expect(tokens.refresh_token).to.be.a('string');
      const claims = decodeJwt(tokens.access_token);
      expect(claims.iss).to.equal(pathServer.issuer);
      expect(claims.aud).to.equal(`${pathServer.issuer}/rest`);
      expect(claims.workspace_id).to.equal(user.workspaces[0]!.id);

      // userinfo, refresh, introspection and revocation answer under the path too.
      const userinfo = await fetch(as.userinfo_endpoint!, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      expect(userinfo.status).to.equal(200);
      expect((await userinfo.json() as Metadata).sub).to.equal(claims.sub);

      const refreshed = await oauth.processRefreshTokenResponse(as, oauthClient, await oauth.refreshTokenGrantRequest(
        as, oauthClient, clientAuth, tokens.refresh_token!, { [oauth.allowInsecureRequests]: true },
      ));
      expect(decodeJwt(refreshed.access_token).iss).to.equal(pathServer.issuer);

      const introspection = await oauth.processIntrospectionResponse(as, oauthClient, await oauth.introspectionRequest(
        as, oauthClient, clientAuth, refreshed.access_token, { [oauth.allowInsecureRequests]: true },
      ));
      expect(introspection.active).to.equal(true);
      expect(introspection.iss).to.equal(pathServer.issuer);

      await oauth.processRevocationResponse(await oauth.revocationRequest(
        as, oauthClient, clientAuth, refreshed.refresh_token!, { [oauth.allowInsecureRequests]: true },
      ));
      const reuse = await oauth.refreshTokenGrantRequest(as, oauthClient, clientAuth, refreshed.refresh_token!, { [oauth.allowInsecureRequests]: true });
      expect(reuse.status).to.equal(400);
      expect((await reuse.json() as Metadata).error).to.equal('invalid_grant');
    });
  });
});
