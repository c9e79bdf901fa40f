import { errors } from 'oidc-provider';

import { hasStackedMarks, STACKED_MARKS_MAX, withoutHiddenCharacters } from '../shared/hidden_characters.ts';

/**
 * What open registration accepts from anyone, bounded and cleaned before a record is written
 * (RFC 7591 section 2 leaves the limits to the server):
 * - sizes: a name a page can show, URIs of a sane length, a handful of each list;
 * - URIs with control characters or whitespace (WHATWG URL parsing silently drops tabs and
 *   newlines, so what a page shows and what the engine compares would differ), userinfo
 *   (`https://bank.example@evil.example/` reads as the bank) or port 0 are refused;
 * - bidirectional-override characters are stripped from the client's name, so a name cannot
 *   be made to read backwards on the consent page ("moc.elgoog" shown as "google.com"), and a
 *   name stacking dozens of combining marks on a letter, which draw over the page, is refused.
 */

/** Bytes at most in a registration or update request, or a metadata document: far above any honest client's metadata. */
export const REGISTRATION_BODY_MAX = 16 * 1024;

/** Characters at most in `client_name`: it is shown as a heading on the login and consent pages. */
export const CLIENT_NAME_MAX = 100;
/** Characters at most in any URI or other string value. */
export const VALUE_MAX = 2000;
/** Values at most in any list (redirect URIs, contacts, ...). */
export const LIST_MAX = 20;

/** Metadata whose values are URLs a browser may be sent to or load. */
const URI_FIELDS = new Set(['redirect_uris', 'post_logout_redirect_uris', 'client_uri', 'logo_uri', 'policy_uri', 'tos_uri', 'initiate_login_uri']);

const CONTROL_OR_SPACE = /[\p{Cc}\p{Zs}\p{Zl}\p{Zp}\u00AD\u200B\uFEFF]/u;
const CONTROL = /\p{Cc}/u;

type Metadata = Record<string, unknown>;

/** Checks every value the registrant sent and cleans the client's name in place. */
export function checkRegistrationHygiene(metadata: Metadata): void {
  for (const [field, value] of Object.entries(metadata)) {
    if (Array.isArray(value)) checkList(field, value);
    else if (typeof value === 'string') checkValue(field, value);
  }
  cleanClientName(metadata);
  checkKeyLengths(metadata);
}

/**
 * An RSA key shorter than this signs nothing the server accepts: jose, which verifies client
 * assertions, refuses it (as FAPI 2.0 section 5.4.1 does). Refused at registration, where the
 * developer can be told why, rather than at every token request.
 */
const RSA_BITS_MIN = 2048;

function checkKeyLengths(metadata: Metadata): void {
  const keys = (metadata.jwks as { keys?: unknown } | undefined)?.keys;
  if (!Array.isArray(keys)) return;
  for (const key of keys as unknown[]) {
    const { kty, n } = (key ?? {}) as { kty?: unknown; n?: unknown };
    if (kty !== 'RSA' || typeof n !== 'string') continue;
    const bits = modulusBits(n);
    if (bits < RSA_BITS_MIN) refuse(`jwks: an RSA key must be at least ${RSA_BITS_MIN} bits long, got one of ${bits} bits`);
  }
}

/** The length of an RSA modulus (the key's `n`, base64url) in bits, leading zeros left out. */
function modulusBits(n: string): number {
  const bytes = Buffer.from(n, 'base64url');
  const first = bytes.findIndex((byte) => byte !== 0);
  if (first === -1) return 0;
  return (bytes.length - first - 1) * 8 + (32 - Math.clz32(bytes[first]!));
}

function checkList(field: string, values: unknown[]): void {
  if (values.length > LIST_MAX) refuse(`${field} may hold at most ${LIST_MAX} values, got ${values.length}`);
  for (const value of values) if (typeof value === 'string') checkValue(field, value);
}

function checkValue(field: string, value: string): void {
  if (value.length > VALUE_MAX) refuse(`${field} values may be at most ${VALUE_MAX} characters long`);
  // Half of a surrogate pair is no character: the consent page could not show it, nor a client parse it back.
  if (!value.isWellFormed()) refuse(`${field} must be text: it holds half of a surrogate pair (\\ud800-\\udfff) with no other half`);
  if (URI_FIELDS.has(field)) checkUri(field, value);
}

function checkUri(field: string, uri: string): void {
  if (CONTROL_OR_SPACE.test(uri)) refuse(`${field} must not contain whitespace or control characters`);
  const url = URL.parse(uri);
  if (!url) return; // the engine's own check names the malformed URI
  if (url.username || url.password || hasUserinfo(uri)) refuse(`${field} must not contain a user name or password (userinfo) before the host, got '${url.protocol}//...@${url.host}'`);
  if (url.port === '0') refuse(`${field} must not use port 0, got '${uri}'`);
}

/** `https://@host/` parses with an empty userinfo the URL object does not report. */
function hasUserinfo(uri: string): boolean {
  return writtenAuthority(uri)?.includes('@') ?? false;
}

/**
 * The authority of a URI as written (between `//` and the path), before the URL parser reads it:
 * undefined when it writes none. The parser takes `https:///cb` for `https://cb/` and `127.1` for
 * 127.0.0.1, while the engine compares the URI as written.
 */
export function writtenAuthority(uri: string): string | undefined {
  return /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(uri)?.[1];
}

function cleanClientName(metadata: Metadata): void {
  const name = metadata.client_name;
  if (typeof name !== 'string') return;
  const cleaned = withoutHiddenCharacters(name).trim();
  if (CONTROL.test(cleaned)) refuse('client_name must not contain control characters');
  if (hasStackedMarks(cleaned)) refuse(`client_name must not stack more than ${STACKED_MARKS_MAX} combining marks on one character: they would draw over the page around the name`);
  if (cleaned.length > CLIENT_NAME_MAX) refuse(`client_name may be at most ${CLIENT_NAME_MAX} characters long`);
  if (cleaned) metadata.client_name = cleaned;
  else delete metadata.client_name;
}

function refuse(description: string): never {
  throw new errors.InvalidClientMetadata(description);
}
