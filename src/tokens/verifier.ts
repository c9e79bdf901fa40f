import { createLocalJWKSet, jwtVerify, type JWK, type JWTPayload } from 'jose';
import type { Context, Middleware } from 'koa';
import type { KoaContextWithOIDC } from 'oidc-provider';

import { mayIntrospect } from './introspection_policy.ts';
import type { RevocationList } from './revocation_list.ts';

/** The claims of an access token this server issued (RFC 9068 plus the workspace claims). */
export interface AccessTokenClaims extends JWTPayload {
  jti: string;
  iat: number;
  exp: number;
  sub: string;
  client_id: string;
  /** The grant reference (`gid`, see revocation_list.ts); user tokens only. */
  gid?: string;
  scope?: string;
  workspace_id: string;
  /** The user's role in the workspace; user tokens only. */
  role?: string;
  /** Userinfo claims asked for by name with the `claims` parameter and granted (requested_claims.ts). */
  userinfo_claims?: string[];
}

/** A user's token (authorization code or refresh); client-credentials tokens act for the workspace, with no user. */
export function isUserToken(claims: AccessTokenClaims): boolean {
  return typeof claims.gid === 'string';
}

/** Verified tokens kept, so a token used again (a resource server's calls within its hour) skips the signature check. */
const VERIFIED_TOKENS_KEPT = 10_000;

/**
 * Checks access tokens this server issued: signature (ES256, our keys), `typ` at+jwt, issuer,
 * audience, expiry, and that no revocation matches it (its grant revoked, its client deleted, the
 * token itself revoked). No store read: the revocation list is mirrored in process.
 */
export class AccessTokenVerifier {
  readonly #keys: ReturnType<typeof createLocalJWKSet>;
  readonly #issuer: string;
  readonly #audience: string;
  readonly #revocations: RevocationList;
  /** Token -> its claims, for tokens whose signature and claims checked out; oldest first. */
  readonly #verified = new Map<string, AccessTokenClaims>();

  constructor(privateJwks: { keys: JWK[] }, issuer: string, audience: string, revocations: RevocationList) {
    this.#keys = createLocalJWKSet({ keys: privateJwks.keys.map(publicPart) });
    this.#issuer = issuer;
    this.#audience = audience;
    this.#revocations = revocations;
  }

  /** The token's claims, or undefined for anything not valid right now. */
  async verify(token: string): Promise<AccessTokenClaims | undefined> {
    const claims = await this.decode(token);
    if (!claims || await this.#revocations.isRevoked(claims)) return undefined;
    return claims;
  }

  /** Signature and claims only, ignoring revocation. */
  async decode(token: string): Promise<AccessTokenClaims | undefined> {
    const known = this.#verified.get(token);
    if (known) {
      // A signature stays valid; only time can make a known token invalid.
      if (known.exp > Date.now() / 1000) return known;
      this.#verified.delete(token);
      return undefined;
    }
    const claims = await this.#verify(token);
    if (claims) {
      if (this.#verified.size >= VERIFIED_TOKENS_KEPT) this.#verified.delete(this.#verified.keys().next().value!);
      this.#verified.set(token, claims);
    }
    return claims;
  }

  async #verify(token: string): Promise<AccessTokenClaims | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.#keys, {
        issuer: this.#issuer,
        audience: this.#audience,
        typ: 'at+jwt',
        algorithms: ['ES256'],
        requiredClaims: ['jti', 'sub', 'client_id', 'exp', 'iat'],
      });
      // Shared by every later use of the same token.
      return Object.freeze(payload) as AccessTokenClaims;
    } catch {
      return undefined;
    }
  }

  /** RFC 7009 revocation of one token. */
  async revoke(claims: AccessTokenClaims): Promise<void> {
    await this.#revocations.revokeToken(claims);
  }
}

function publicPart(jwk: JWK): JWK {
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, oth: _oth, ...publicJwk } = jwk;
  return publicJwk;
}

/**
 * The engine answers `unsupported_token_type` when asked to introspect or revoke a JWT access
 * token, having authenticated the client first. For tokens this server issued, the host finishes
 * the job: RFC 7662 introspection from the verified claims (for the callers allowed to see them),
 * RFC 7009 revocation through the revocation list.
 */
export function jwtAccessTokenEndpoints(verifier: AccessTokenVerifier): { introspection: Middleware; revocation: Middleware } {
  return {
    introspection: async (ctx, next) => {
      await next();
      const engine = engineRefusedJwt(ctx);
      if (!engine) return;
      const { token, client } = engine;
      const claims = await verifier.verify(token);
      // The engine's rule for the tokens it introspects (introspection_policy.ts); a token the
      // caller may not see is answered exactly as an unknown one.
      const allowed = claims && mayIntrospect(client, { clientId: claims.client_id, audience: claims.aud });
      ctx.status = 200;
      ctx.body = allowed ? { active: true, token_type: 'Bearer', ...claims } : { active: false };
    },
    revocation: async (ctx, next) => {
      await next();
      const engine = engineRefusedJwt(ctx);
      if (!engine) return;
      const claims = await verifier.decode(engine.token);
      // RFC 7009: invalid tokens, and other clients' tokens, are answered 200 without effect.
      if (claims && claims.client_id === engine.client.clientId) await verifier.revoke(claims);
      ctx.status = 200;
      ctx.body = {};
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
