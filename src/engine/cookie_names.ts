/**
 * The engine's cookie names. With an https issuer the session cookie (Path=/, no Domain, always
 * Secure: src/http/pinned_origin.ts) carries the `__Host-` prefix (RFC 6265bis section 4.1.3.2): a browser
 * then refuses any `__Host-session` cookie set by a sibling subdomain or over http, so nobody can
 * plant a session of their choosing (session fixation) or overwrite the user's. The interaction
 * cookies are scoped to their own paths, which the prefix forbids, so they keep their names; over
 * http (local development) no cookie can be Secure and none takes the prefix.
 */
export function cookieNames(issuer: string): { session: string; interaction: string; resume: string } {
  const session = new URL(issuer).protocol === 'https:' ? '__Host-session' : '_session';
  return { session, interaction: '_interaction', resume: '_interaction_resume' };
}
