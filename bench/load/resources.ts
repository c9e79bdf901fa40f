/** Resource identifiers both servers agree on, relative to each server's issuer. */

/** The API every user and workspace token is for: the service's `apiAudience`, mirrored by the baseline. */
export function apiResource(issuer: string): string {
  return `${issuer}/rest`;
}

/** The baseline's second resource, whose access tokens are opaque (introspectable by the bare engine). */
export const BASELINE_OPAQUE_RESOURCE = '/opaque';
