import { createLocalJWKSet, jwtVerify, type JWK, type JWTPayload } from 'jose';
import type { Context, Middleware } from 'koa';
import type { KoaContextWithOIDC } from 'oidc-provider';

import type { Store } from '../../adapters/store.ts';

/** The claims of an access token this server issued (RFC 9068 plus the workspace claims). */
export interface AccessTokenClaims extends JWTPayload {
  jti: string;
  sub: string;
  client_id: string;
  scope?: string;
  workspace_id: string;
  role?: string;
}

/** The engine models a JWT access token may be stored as, by its jti. */
const ACCESS_TOKEN_MODELS = ['AccessToken', 'ClientCredentials'] as const;

/**
 * Checks access tokens this server issued: signature (ES256, our keys), `typ` at+jwt, issuer,
 * audience, expiry, that the token is still on record (not revoked, grant not revoked), and that
 * its client still exists (deleting a client ends its access, RFC 7592 2.3).
 */
export class AccessTokenVerifier {
  readonly #keys: ReturnType<typeof createLocalJWKSet>;
  readonly #issuer: string;
  readonly #audience: string;
  readonly #store: Store;

  constructor(privateJwks: { keys: JWK[] }, issuer: string, audience: string, store: Store) {
    this.#keys = createLocalJWKSet({ keys: privateJwks.keys.map(publicPart) });
    this.#issuer = issuer;
    this.#audience = audience;
    this.#store = store;
  }

  /** The token's claims and the model it is stored as, or undefined for anything not valid right now. */
  async verify(token: string): Promise<{ claims: AccessTokenClaims; model: string } | undefined> {
    const claims = await this.decode(token);
    if (!claims) return undefined;
    const [model, client] = await Promise.all([
      this.#storedModel(claims.jti),
      this.#store.model('Client').find(claims.client_id),
    ]);
    return model && client ? { claims, model } : undefined;
  }

  /** Signature and claims only, ignoring whether the token is still on record. */
  async decode(token: string): Promise<AccessTokenClaims | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.#keys, {
        issuer: this.#issuer,
        audience: this.#audience,
        typ: 'at+jwt',
        algorithms: ['ES256'],
        requiredClaims: ['jti', 'sub', 'client_id', 'exp', 'iat'],
      });
      return payload as AccessTokenClaims;
    } catch {
      return undefined;
    }
  }

  async #storedModel(jti: string): Promise<string | undefined> {
    for (const model of ACCESS_TOKEN_MODELS) {
      if (await this.#store.model(model).find(jti)) return model;
    }
    return undefined;
  }

  /** Removes the token's record, so every later check refuses it. */
  async revoke(jti: string): Promise<void> {
    await Promise.all(ACCESS_TOKEN_MODELS.map((model) => this.#store.model(model).destroy(jti)));
  }
}

function publicPart(jwk: JWK): JWK {
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, oth: _oth, ...publicJwk } = jwk;
  return publicJwk;
}

/**
 * The engine answers `unsupported_token_type` when asked to introspect or revoke a JWT access
 * token, having authenticated the client first. For tokens this server issued, the host finishes
 * the job: RFC 7662 introspection from the verified claims and the token's record, RFC 7009
 * revocation by deleting that record.
 */
export function jwtAccessTokenEndpoints(verifier: AccessTokenVerifier): { introspection: Middleware; revocation: Middleware } {
  return {
    introspection: async (ctx, next) => {
      await next();
      const engine = engineRefusedJwt(ctx);
      if (!engine) return;
      const { token, client } = engine;
      const verified = await verifier.verify(token);
      // A public client may only introspect its own tokens (the engine's rule for opaque ones).
      const allowed = verified && (client.clientAuthMethod !== 'none' || verified.claims.client_id === client.clientId);
      ctx.status = 200;
      ctx.body = allowed ? { active: true, token_type: 'Bearer', ...verified.claims } : { active: false };
    },
    revocation: async (ctx, next) => {
      await next();
      const engine = engineRefusedJwt(ctx);
      if (!engine) return;
      const claims = await verifier.decode(engine.token);
      // RFC 7009: invalid tokens, and other clients' tokens, are answered 200 without effect.
      if (claims && claims.client_id === engine.client.clientId) await verifier.revoke(claims.jti);
      ctx.status = 200;
      ctx.body = '';
    },
  };
}

function engineRefusedJwt(ctx: Context) {
  const body = ctx.body as { error?: string } | undefined;
  if (ctx.status !== 400 || body?.error !== 'unsupported_token_type') return undefined;
  const { oidc } = ctx as unknown as Partial<KoaContextWithOIDC>;
  const token = oidc?.params?.token;
  const client = oidc?.client;
  if (typeof token !== 'string' || !client) return undefined;
  return { token, client };
}
