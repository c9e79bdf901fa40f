// The engine's own steps used where the service takes part in one of its grants: the DPoP steps,
// by the grant registered in place of client_credentials (src/engine/grants/client_credentials.ts),
// and the revocation of a grant, by a code redemption that loses its code to another
// (src/engine/concurrent_code_redemptions.ts), and the engine's own checks of a request object's
// claims, which the host's hook adds to (src/engine/provider.ts), and the session cookie's options, by
// the renewal of a session's id at a password change (src/engine/session_renewal.ts). Not in the
// engine's typings: checked at each upgrade of the pinned engine by the DPoP tests of that grant, the
// concurrent redemption tests, the FAPI request object tests (test/http/fapi.test.ts) and the
// settings area's password test (test/browser/settings_accounts.test.ts).
declare module 'oidc-provider/lib/helpers/validate_dpop.js' {
  import type { KoaContextWithOIDC, Provider } from 'oidc-provider';

  /** A verified proof: its key's thumbprint, its `jti` and `iat`; undefined when the request has none. */
  export interface DpopProof { thumbprint: string; jti: string; iat: number }
  export default function validateDpop(provider: Provider, ctx: KoaContextWithOIDC, accessToken?: string): Promise<DpopProof | undefined>;
}

declare module 'oidc-provider/lib/helpers/grant_common.js' {
  import type { KoaContextWithOIDC, Provider } from 'oidc-provider';
  import type { DpopProof } from 'oidc-provider/lib/helpers/validate_dpop.js';

  /** Refuses a replayed proof, then binds `token` to the proof's key (`cnf.jkt`). */
  export function applyDpopBinding(provider: Provider, ctx: KoaContextWithOIDC, dPoP: DpopProof | undefined, token: { setThumbprint(kind: 'jkt', value: string): void }): Promise<void>;
}

declare module 'oidc-provider/lib/helpers/sender_constraints.js' {
  import type { KoaContextWithOIDC, Provider } from 'oidc-provider';
  import type { DpopProof } from 'oidc-provider/lib/helpers/validate_dpop.js';

  /** Refuses a request without a proof from a client registered with `dpop_bound_access_tokens`. */
  export function checkDpopRequired(provider: Provider, ctx: KoaContextWithOIDC, dPoP: DpopProof | undefined): void;
}

declare module 'oidc-provider/lib/helpers/revoke.js' {
  import type { KoaContextWithOIDC } from 'oidc-provider';

  /** Revokes everything issued under the grant (its tokens and codes) and, by the revokeGrantPolicy, the grant itself. */
  export default function revoke(ctx: KoaContextWithOIDC, grantId: string | undefined): Promise<void>;
}

declare module 'oidc-provider/lib/helpers/defaults.js' {
  import type { Client, KoaContextWithOIDC } from 'oidc-provider';

  /** The engine's configuration defaults; only what the host calls of them. */
  export const defaults: {
    features: {
      requestObjects: {
        /** FAPI's required claims (exp, aud, nbf) and the bound on exp - nbf, for the clients the profile applies to. */
        assertJwtClaimsAndHeader(ctx: KoaContextWithOIDC, claims: Record<string, unknown>, header: Record<string, unknown>, client: Client): Promise<void>;
      };
    };
  };
}

declare module 'oidc-provider/lib/helpers/weak_cache.js' {
  import type { Provider } from 'oidc-provider';
  import type { SetOption } from 'cookies';

  /** The engine's own state of a provider; only the cookie options the host sets the session cookie with. */
  export default function instance(provider: Provider): { configuration: { cookies: { long: SetOption } } };
}
