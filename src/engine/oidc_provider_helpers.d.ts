// The engine's own DPoP steps for its grants, used by the grant registered in place of one of them
// (src/engine/grants/client_credentials.ts). Not in the engine's typings: checked at each upgrade
// of the pinned engine by the DPoP tests of that grant.
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
