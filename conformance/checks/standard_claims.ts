/**
 * AbstractValidateOpenIdStandardClaims: the types OpenID Connect Core 5.1 gives the standard
 * claims. Unknown claims are allowed (skipped); an empty object is not.
 */
type Validator = { description: string; valid(value: unknown): boolean };

const nonEmptyString: Validator = {
  description: 'a string with content',
  valid: (value) => typeof value === 'string' && value.trim() !== '' && value.toLowerCase() !== 'null',
};
const boolean: Validator = { description: 'a boolean', valid: (value) => typeof value === 'boolean' };
const number: Validator = { description: 'a number', valid: (value) => typeof value === 'number' };
const jsonObject: Validator = { description: 'a JSON object', valid: (value) => isObject(value) };
const birthdate: Validator = {
  description: 'a valid birthdate: YYYY-MM-DD, 0000-MM-DD or YYYY',
  valid: (value) => nonEmptyString.valid(value) && isBirthdate(value as string),
};

const ADDRESS_CLAIMS: Record<string, Validator> = Object.fromEntries(
  ['formatted', 'street_address', 'locality', 'region', 'postal_code', 'country'].map((name) => [name, nonEmptyString]),
);

const STANDARD_CLAIMS: Record<string, Validator> = {
  ...Object.fromEntries(['sub', 'name', 'given_name', 'family_name', 'middle_name', 'nickname', 'preferred_username', 'profile', 'picture', 'website', 'email', 'gender', 'zoneinfo', 'locale', 'phone_number', 'txn'].map((name) => [name, nonEmptyString])),
  email_verified: boolean,
  phone_number_verified: boolean,
  birthdate,
  updated_at: number,
  _claim_names: jsonObject,
  _claim_sources: jsonObject,
};

/** The ID token claims that are not about the user, removed before the standard-claims check. */
const ID_TOKEN_NON_IDENTITY_CLAIMS = ['iss', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'acr', 'amr', 'azp', 'c_hash', 'at_hash', 's_hash', 'jti', 'nbf', 'verified_claims'];

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function isBirthdate(value: string): boolean {
  const year = new Date().getUTCFullYear();
  const saneYear = (y: number) => y >= 1850 && y <= year;
  if (/^\d{4}$/.test(value)) return saneYear(Number(value));
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!match) return false;
  const [y, m, d] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const date = new Date(Date.UTC(y === 0 ? 2000 : y, m - 1, d));
  const exists = date.getUTCMonth() === m - 1 && date.getUTCDate() === d;
  return exists && (y === 0 || saneYear(y));
}

/** Every problem with the claims' types, named (empty when valid). */
export function standardClaimProblems(claims: Record<string, unknown>, context = ''): string[] {
  if (Object.keys(claims).length === 0) return [`${context || 'the claims'}: not a JSON object or no identity claims`];
  const problems: string[] = [];
  for (const [name, value] of Object.entries(claims)) {
    const label = context ? `${context}.${name}` : name;
    if (name === 'address' && !context) {
      problems.push(...(isObject(value) ? addressProblems(value) : ['address is not a valid object']));
      continue;
    }
    const validator = (context ? ADDRESS_CLAIMS : STANDARD_CLAIMS)[name];
    if (validator && !validator.valid(value)) problems.push(`${label} is not ${validator.description} (${JSON.stringify(value)})`);
  }
  return problems;
}

function addressProblems(address: Record<string, unknown>): string[] {
  return standardClaimProblems(address, 'address');
}

/** The identity claims of an ID token: the claims left once the token's own are removed. */
export function idTokenIdentityClaims(claims: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(claims).filter(([name]) => !ID_TOKEN_NON_IDENTITY_CLAIMS.includes(name)));
}

/** AbstractVerifyScopesReturnedInClaims: the claims each standard scope stands for. */
export const SCOPE_STANDARD_CLAIMS: Record<string, string[]> = {
  openid: ['sub'],
  profile: ['name', 'given_name', 'family_name', 'middle_name', 'nickname', 'profile', 'picture', 'website', 'gender', 'birthdate', 'zoneinfo', 'locale', 'updated_at', 'preferred_username'],
  email: ['email', 'email_verified'],
  address: ['address'],
  phone: ['phone_number', 'phone_number_verified'],
  offline_access: [],
};

/** AbstractUpdatedAtValid: if present, not in the future (5 minutes' skew) and not before 1990. */
export function updatedAtProblem(claims: Record<string, unknown>, where: string): string | undefined {
  const updatedAt = claims.updated_at;
  if (typeof updatedAt !== 'number') return undefined;
  const now = Date.now() / 1000;
  if (updatedAt > now + 300) return `updated_at in ${where} appears to be in the future`;
  if (updatedAt < Date.UTC(1990, 0, 1) / 1000) return `updated_at in ${where} appears to be prior to the year 1990`;
  return undefined;
}
