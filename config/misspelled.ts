import { SCHEMA, type Env } from './schema.ts';

/**
 * Settings that look like the service's own but are not: a variable one slip away from a known
 * name (`BASEURL`, `LOG_LEVL`, `PKCE_REQUIRE`, `PROT`), or one in a family of the service's
 * settings it does not have (`RATE_LIMIT_TOKENS`, `METRICS_ADDRESS`), or another service's name for
 * one of them (`REDIS_URL` for `STORE`). The service would silently
 * ignore them and run on defaults the operator thought they had changed; at start each is
 * reported with the name likely meant. Only names are read, never values (a value may be a secret).
 */
export interface Misspelling {
  name: string;
  /** The known setting it most likely means. */
  meant: string;
}

const KNOWN: readonly string[] = Object.keys(SCHEMA);

/** Names other services give a setting of this one's, which no edit distance would lead to. */
const NAMES_ELSEWHERE: Readonly<Record<string, string>> = { REDIS_URL: 'STORE', DATABASE_URL: 'STORE', ISSUER: 'BASE_URL', ISSUER_URL: 'BASE_URL' };

/** First segments shared by two settings or more (`RATE_`, `METRICS_`, `KEY_`, `CIMD_`): a variable starting with one is meant for this service. */
const FAMILIES: readonly string[] = [...new Set(KNOWN.filter((name) => name.includes('_')).map((name) => `${name.split('_')[0]}_`))]
  .filter((prefix) => KNOWN.filter((name) => name.startsWith(prefix)).length >= 2);

export function misspelledSettings(env: Env): Misspelling[] {
  const found: Misspelling[] = [];
  for (const name of Object.keys(env).sort()) {
    if (KNOWN.includes(name) || !/^[A-Z][A-Z0-9_]*$/.test(name)) continue;
    if (NAMES_ELSEWHERE[name]) {
      found.push({ name, meant: NAMES_ELSEWHERE[name] });
      continue;
    }
    const meant = closest(name);
    const slip = distance(name, meant) <= (name.length <= 5 ? 1 : 2);
    if (slip || FAMILIES.some((prefix) => name.startsWith(prefix))) found.push({ name, meant });
  }
  return found;
}

/**
 * Says each of them through `warn` (a logger's), in the words the service at start and the admin
 * CLI share: one warning a variable, naming the setting likely meant, never its value.
 */
export function warnOfMisspelledSettings(env: Env, warn: (message: string, fields: { variable: string; meant: string }) => void): void {
  for (const { name, meant } of misspelledSettings(env)) {
    warn(`${name} is not a setting of this service and is ignored; did you mean ${meant}?`, { variable: name, meant });
  }
}

function closest(name: string): string {
  let best = KNOWN[0]!;
  for (const known of KNOWN) if (distance(name, known) < distance(name, best)) best = known;
  return best;
}

/** Edits (insert, delete, replace, swap two neighbours) from one name to the other: optimal string alignment distance. */
function distance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i += 1) {
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      rows[i]![j] = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) rows[i]![j] = Math.min(rows[i]![j]!, rows[i - 2]![j - 2]! + 1);
    }
  }
  return rows[a.length]![b.length]!;
}
