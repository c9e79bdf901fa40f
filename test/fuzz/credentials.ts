import fc, { type Arbitrary } from 'fast-check';

import { formEncode, headerJunk, jsonJunk, junkText, targetChar } from './harness.ts';

/**
 * Credentials for fuzzing: Authorization headers (Basic and Bearer) built around the live
 * credentials of the moment (tokens rotate), near misses of real tokens, JWT- and API-key-shaped junk.
 */

const b64 = (text: string, encoding: 'utf8' | 'latin1' = 'utf8') => Buffer.from(text, encoding).toString('base64');

/** Something shaped like a JWT (or a JWE): odd headers, any payload, a junk signature. */
export function fakeJwt(kids: readonly string[] = []): Arbitrary<string> {
  const segment = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value) ?? '', 'utf8').toString('base64url');
  const header = fc.record({
    alg: fc.oneof(fc.constantFrom('none', 'ES256', 'RS256', 'HS256', 'PS256', 'EdDSA', 'ES512', 'dir', 'RSA-OAEP'), junkText),
    typ: fc.oneof(fc.constantFrom('at+jwt', 'JWT', 'application/at+jwt', 'JWE'), junkText),
    kid: fc.oneof(fc.constantFrom(...kids, 'x'), junkText),
    crit: fc.array(junkText, { maxLength: 2 }),
    b64: fc.boolean(),
    jku: fc.constantFrom('http://127.0.0.1:9/jwks', 'file:///etc/passwd'),
    enc: fc.constantFrom('A128GCM', 'x'),
  }, { requiredKeys: [] });
  const payload = fc.oneof(
    jsonJunk,
    fc.record({
      iss: jsonJunk, sub: jsonJunk, aud: jsonJunk, exp: jsonJunk, iat: jsonJunk, jti: jsonJunk, scope: jsonJunk, client_id: jsonJunk, workspace_id: jsonJunk,
    }, { requiredKeys: [] }),
  );
  const signature = fc.oneof(fc.constant(''), fc.base64String({ maxLength: 100 }).map((s) => s.replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_')), junkText.map(segment));
  return fc.oneof(
    fc.tuple(header, payload, signature).map(([h, p, s]) => `${segment(h)}.${segment(p)}.${s}`),
    fc.tuple(header, fc.array(signature, { minLength: 0, maxLength: 5 })).map(([h, rest]) => [segment(h), ...rest].join('.')),
  );
}

/** How a known credential is changed: not at all, or to a near miss (cut, extended, one character off, case, doubled), or replaced. */
export type Tweak =
  | { kind: 'exact' }
  | { kind: 'cut'; keep: number }
  | { kind: 'append'; suffix: string }
  | { kind: 'change'; at: number; char: string }
  | { kind: 'case' }
  | { kind: 'twice'; separator: string }
  | { kind: 'junk'; value: string };

/** Near misses of a credential (never the credential itself, unless a changed character happens to be the same one). */
export const nearMiss: Arbitrary<Tweak> = fc.oneof(
  fc.record({ kind: fc.constant('cut' as const), keep: fc.nat({ max: 200 }) }),
  fc.record({ kind: fc.constant('append' as const), suffix: fc.constantFrom('=', '==', 'A', '.', '..', '%00', ' ', '\u00ff', 'x'.repeat(100)) }),
  fc.record({ kind: fc.constant('change' as const), at: fc.nat({ max: 1000 }), char: fc.constantFrom('A', '_', '-', '.', '=', '+', '/', '\u00ff') }),
  fc.record({ kind: fc.constant('case' as const) }),
  fc.record({ kind: fc.constant('twice' as const), separator: fc.constantFrom('', '.', ' ', ',') }),
  fc.record({ kind: fc.constant('junk' as const), value: headerJunk }),
);

/** A tweak: the credential itself with weight `exact`, else a near miss. */
export function tweaks(exact = 0): Arbitrary<Tweak> {
  return exact > 0 ? fc.oneof({ weight: exact, arbitrary: fc.constant<Tweak>({ kind: 'exact' }) }, { weight: 3, arbitrary: nearMiss }) : nearMiss;
}

export function applyTweak(value: string, tweak: Tweak): string {
  switch (tweak.kind) {
    case 'exact': return value;
    case 'cut': return value.slice(0, Math.min(tweak.keep, Math.max(0, value.length - 1)));
    case 'append': return `${value}${tweak.suffix}`;
    case 'change': {
      if (!value) return tweak.char;
      const at = tweak.at % value.length;
      const char = tweak.char === value[at] ? (value[at] === 'B' ? 'C' : 'B') : tweak.char;
      return `${value.slice(0, at)}${char}${value.slice(at + 1)}`;
    }
    case 'case': return value === value.toUpperCase() ? value.toLowerCase() : value.toUpperCase();
    case 'twice': return `${value}${tweak.separator}${value}`;
    case 'junk': return tweak.value;
  }
}

/** The credentials an Authorization header is built from at the time of the request (tokens rotate). */
export interface LiveCredentials {
  clientId?: string;
  clientSecret?: string;
  /** Bearer credentials worth sending and mutating (access tokens, API keys, registration access tokens). */
  tokens?: readonly string[];
}

/** An Authorization header, planned before the credentials it uses are known. */
export type AuthPlan =
  | { kind: 'none' }
  | { kind: 'raw'; value: string | string[] }
  | { kind: 'bearer'; scheme: string; token: number; tweak: Tweak }
  | { kind: 'basic'; user: Tweak; pass: Tweak; encode: boolean; charset: 'utf8' | 'latin1' };

export interface AuthPlanOptions {
  /** Weight of the real credential among the tweaks (0: never sent as is). */
  exact?: number;
  /** Weight of a plain `Bearer <real token>` (to get past authentication, where the fuzzing is about the rest). */
  realBearer?: number;
  /** Weight of no header at all. */
  none?: number;
  kids?: readonly string[];
}

const BEARER_SCHEMES = ['Bearer ', 'bearer ', 'BEARER ', 'Bearer  ', 'Bearer\t', 'Bearer'];

/**
 * An Authorization header around live credentials: Basic with the right id and a near-miss
 * secret, bad base64, no colon, broken percent-encoding (RFC 6749 2.3.1 form-encodes both halves);
 * Bearer with near-miss tokens, JWT-shaped junk, API-key-shaped junk; odd schemes; the header twice.
 */
export function authPlan(options: AuthPlanOptions = {}): Arbitrary<AuthPlan> {
  const exact = options.exact ?? 0;
  const half = fc.oneof(fc.constantFrom('', '%', '%ZZ', '%FF', '%C0%AF', ':', '%3A', '\u00ff'), junkText, fc.string({ unit: targetChar, maxLength: 8 }));
  const raw = (value: Arbitrary<string | string[]>) => value.map((v): AuthPlan => ({ kind: 'raw', value: v }));
  const basicJunk = fc.oneof(
    fc.tuple(half, half, fc.constantFrom<'utf8' | 'latin1'>('utf8', 'latin1')).map(([user, pass, charset]) => `Basic ${b64(`${user}:${pass}`, charset)}`),
    half.map((text) => `Basic ${b64(text)}`),
    headerJunk.map((text) => `Basic ${text}`),
    fc.constantFrom('Basic', 'Basic ', 'Basic =', 'Basic Og==', 'Basic Og', 'Basic ====', 'Basic !!!!'),
  );
  const bearerJunk = fc.tuple(fc.constantFrom(...BEARER_SCHEMES), fc.oneof(
    fakeJwt(options.kids),
    fc.string({ unit: fc.constantFrom(...'0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'), minLength: 38, maxLength: 38 }).map((rest) => `wsk_${rest}`),
    headerJunk.map((text) => `wsk_${text}`),
    headerJunk,
  )).map(([scheme, value]) => `${scheme}${value}`);
  const oddSchemes = fc.constantFrom('Digest username="a"', 'Negotiate YIIB', 'DPoP x', 'Token x', '', ' ');
  const single = fc.oneof(basicJunk, bearerJunk, oddSchemes, headerJunk);
  return fc.oneof(
    { weight: options.none ?? 1, arbitrary: fc.constant<AuthPlan>({ kind: 'none' }) },
    ...(options.realBearer ? [{ weight: options.realBearer, arbitrary: fc.nat({ max: 10 }).map((token): AuthPlan => ({ kind: 'bearer', scheme: 'Bearer ', token, tweak: { kind: 'exact' } })) }] : []),
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('bearer' as const), scheme: fc.oneof({ weight: 4, arbitrary: fc.constant('Bearer ') }, { weight: 1, arbitrary: fc.constantFrom(...BEARER_SCHEMES) }), token: fc.nat({ max: 10 }), tweak: tweaks(exact) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('basic' as const), user: tweaks(3), pass: tweaks(exact), encode: fc.boolean(), charset: fc.constantFrom<'utf8' | 'latin1'>('utf8', 'latin1') }) },
    { weight: 3, arbitrary: raw(single) },
    { weight: 1, arbitrary: raw(fc.array(single, { minLength: 2, maxLength: 2 })) },
  );
}

export function authorizationOf(plan: AuthPlan, live: LiveCredentials): string | string[] | undefined {
  switch (plan.kind) {
    case 'none': return undefined;
    case 'raw': return plan.value;
    case 'bearer': {
      const tokens = live.tokens ?? [];
      const token = tokens.length ? tokens[plan.token % tokens.length]! : 'no-token';
      return `${plan.scheme}${headerSafe(applyTweak(token, plan.tweak))}`;
    }
    case 'basic': {
      const user = applyTweak(live.clientId ?? 'client', plan.user);
      const pass = applyTweak(live.clientSecret ?? 'secret', plan.pass);
      const pair = plan.encode ? `${formEncode(user)}:${formEncode(pass)}` : `${user}:${pass}`;
      return `Basic ${b64(pair, plan.charset)}`;
    }
  }
}

/** Drops what Node's client refuses to put in a header (it never reaches a server). */
export function headerSafe(value: string): string {
  return value.replace(/[^\t\x20-\x7e\x80-\xff]/g, '');
}

