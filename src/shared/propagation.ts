/**
 * The longest an instance acts on an out-of-date view of a change made elsewhere (through another
 * instance, or by the admin CLI): a revoked grant, token or client, an updated or deleted client.
 *
 * Each instance re-reads the revocation list every second and never verifies a token against a
 * copy older than this; it re-reads a cached client record older than this. So a change is honoured
 * everywhere this long after it is written, and commands that make one (the admin CLI's
 * `client delete`) wait this long before they report it done.
 */
export const PROPAGATION_BOUND_MS = 2000;
