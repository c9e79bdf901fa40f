/** Every lifetime the service gives out, in seconds. */
export const LIFETIMES = {
  /** The specification: `expires_in` is 3600 for every grant. */
  AccessToken: 3600,
  ClientCredentials: 3600,
  /** Short and single-use (docs/decisions/tokens.md). */
  AuthorizationCode: 60,
  /** Each use rotates it (a FAPI 2.0 client's excepted: src/engine/refresh_tokens.ts); an unused one lapses after 30 days. */
  RefreshToken: 30 * 24 * 3600,
  IdToken: 3600,
  /** How long a login or consent page may stay open. */
  Interaction: 10 * 60,
  /** A browser sign-in lasts two weeks (a session nobody signed in to, far less: sessionLifetime). */
  Session: 14 * 24 * 3600,
  /** Consent is remembered for a year; a grant never outlives the refresh tokens it backs by much. */
  Grant: 365 * 24 * 3600,
  /** Initial access tokens made by the admin CLI, unless it is told otherwise: a day, enough to hand one over and use it. */
  InitialAccessToken: 24 * 3600,
  /**
   * A client's metadata document (CIMD): kept for its `Cache-Control: max-age` within
   * [minSeconds, maxSeconds], and served up to maxSeconds while a fetch to renew it fails; a fetch
   * that failed is not tried again for failureSeconds.
   */
  MetadataDocument: { minSeconds: 60, maxSeconds: 24 * 3600, failureSeconds: 30 },
} as const;

/**
 * The shortest pre-publication of a new signing key, in seconds: every instance has the new keys
 * (KEY_SET_POLL_MS, within src/shared/propagation.ts PROPAGATION_BOUND_MS) before any signs with them. The
 * floor of KEY_PREPUBLISH, and what `keys rotate --now` waits (src/keys/rotation.ts).
 */
export const MIN_PREPUBLISH_SECONDS = 3;

/**
 * A session's lifetime: two weeks once someone signed in to it. The engine also keeps a session
 * for a browser that signed in to nothing (a sign-out from a browser without a session keeps its
 * confirm form's xsrf value in one); that lives as long as an interaction, so anonymous requests
 * cannot fill the store with two-week records.
 */
export function sessionLifetime(_ctx: unknown, session: { accountId?: string | undefined }): number {
  return session.accountId ? LIFETIMES.Session : LIFETIMES.Interaction;
}
