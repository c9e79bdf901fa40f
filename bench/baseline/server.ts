/**
 * The baseline: the bare engine (the installed oidc-provider) configured like the service, with
 * none of the service's own code. Run as its own process (`node bench/baseline/server.ts`, env PORT and
 * HOST) so the bench measures both servers the same way, over loopback, one process each.
 *
 * Storage is plain Maps in process (memory_adapter.ts says why not the engine's own dev adapter).
 *
 * Where the service's product rules have no engine equivalent (workspaces, hashed client secrets,
 * stored-and-revocable JWT access tokens, the host-served userinfo) the baseline simply does not
 * have them: the difference in cost is what the bench is for.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';

import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from 'jose';
import Provider, { errors, type Configuration, type KoaContextWithOIDC, type ResourceServer } from 'oidc-provider';

import { LIFETIMES } from '../../config/lifetimes.ts';
import { ENGINE_ROUTES, USERINFO_PATH } from '../../src/engine/routes.ts';
import { MemoryAdapter } from './memory_adapter.ts';
import { BASELINE_OPAQUE_RESOURCE, apiResource } from '../load/resources.ts';

const port = Number(process.env.PORT ?? 0);
const host = process.env.HOST ?? '127.0.0.1';
const issuer = process.env.BASE_URL ?? `http://${host}:${port}`;
const audience = apiResource(issuer);
const opaqueResource = `${issuer}${BASELINE_OPAQUE_RESOURCE}`;
const SCOPES = ['openid', 'api', 'profile'];

async function signingKey(alg: 'ES256' | 'RS256'): Promise<JWK> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, alg, use: 'sig', kid: await calculateJwkThumbprint(jwk) };
}

/** The API: ES256 JWT access tokens, one hour, like the service's data API resource server. */
const apiServer: ResourceServer = {
  scope: SCOPES.join(' '),
  audience,
  accessTokenTTL: LIFETIMES.AccessToken,
  accessTokenFormat: 'jwt',
  jwt: { sign: { alg: 'ES256' } },
};

/** A second resource with opaque tokens: the bare engine cannot introspect JWTs, so its introspection scenario uses these. */
const opaqueServer: ResourceServer = {
  scope: SCOPES.join(' '),
  audience: opaqueResource,
  accessTokenTTL: LIFETIMES.AccessToken,
  accessTokenFormat: 'opaque',
};

const configuration: Configuration = {
  adapter: MemoryAdapter,
  jwks: { keys: [await signingKey('ES256'), await signingKey('RS256')] } as Configuration['jwks'],
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  routes: { ...ENGINE_ROUTES, userinfo: USERINFO_PATH },
  findAccount: (_ctx, accountId) => ({
    accountId,
    claims: () => ({ sub: accountId, name: 'Bench User', given_name: 'Bench', family_name: 'User', email: `${accountId}@example.com` }),
  }),
  scopes: SCOPES,
  claims: { openid: ['sub'], profile: ['name', 'given_name', 'family_name', 'email'] },
  responseTypes: ['code'],
  pkce: { required: () => true },
  clientAuthMethods: ['client_secret_post', 'client_secret_basic', 'none'],
  clientDefaults: {
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
    id_token_signed_response_alg: 'RS256',
  },
  ttl: {
    AccessToken: LIFETIMES.AccessToken,
    ClientCredentials: LIFETIMES.ClientCredentials,
    AuthorizationCode: LIFETIMES.AuthorizationCode,
    RefreshToken: LIFETIMES.RefreshToken,
    IdToken: LIFETIMES.IdToken,
    Interaction: LIFETIMES.Interaction,
    Session: LIFETIMES.Session,
    Grant: LIFETIMES.Grant,
  },
  expiresWithSession: () => false,
  issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: true,
  features: {
    // The engine's own login and consent pages, so the bench can mint codes over HTTP.
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    userinfo: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // Everything that asks for `api` is for the API, as in the service. A request without `api`
      // (the userinfo scenario's `openid profile`) gets no resource: the engine's userinfo accepts
      // only audience-less (opaque) tokens, which the service's host-served userinfo does not need.
      defaultResource: (ctx: KoaContextWithOIDC, _client, oneOf?: readonly string[]) => {
        if (oneOf) return oneOf;
        const scope = String(ctx.oidc.params?.scope ?? 'api');
        return scope.split(' ').includes('api') ? audience : undefined;
      },
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx: KoaContextWithOIDC, resource: string) => {
        if (resource === audience) return apiServer;
        if (resource === opaqueResource) return opaqueServer;
        throw new errors.InvalidTarget('unknown resource');
      },
    },
  },
};

const provider = new Provider(issuer, configuration);
// The engine swallows 500s into a generic body; print them, since any error invalidates a run.
provider.on('server_error', (_ctx: KoaContextWithOIDC, error: Error) => process.stderr.write(`server_error: ${error.stack ?? error.message}\n`));

const server = createServer(provider.callback());
server.listen(port, host);
const stop = () => {
  server.close();
  server.closeAllConnections();
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
