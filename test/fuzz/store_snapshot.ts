import { createHash } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';

import { LIFETIMES } from '../../config/lifetimes.ts';
import type { RawRequest, RawResponse } from './http.ts';

const clip = (text: string, length: number) => (text.length > length ? `${text.slice(0, length)}... (${text.length} chars)` : text);

/**
 * The store as the fuzz tests watch it: the server's SQLite file, read beside the server, so that
 * "a refused request changed nothing" is checked on the data itself, row by row.
 */

/** Each table of the SQLite file (oidc_models split by model), as sorted JSON lines of its rows, with a digest. */
export type StoreFingerprint = ReadonlyMap<string, { digest: string; rows: readonly string[] }>;

/**
 * What changes in the background, whatever the request: an API key's last-use time (recorded
 * once a minute on a successful authentication, which a request refused for its body still had)
 * and a grant's (written once a minute after the token response of a code exchange or refresh,
 * so it can land during a later request).
 */
const BACKGROUND_WRITES = { columns: new Set(['api_keys.last_used_at']), models: new Set(['GrantActivity']) };

/**
 * Reads the server's SQLite file (read-only, beside the server's own connection) and fingerprints
 * every table, leaving out what changes without a request to cause it: rows that expire before
 * `cutoff` (the server sweeps expired rows every minute), and BACKGROUND_WRITES.
 */
export class StoreWatch {
  readonly #db: DatabaseSync;
  #cached: { version: number; cutoff: number; fingerprint: StoreFingerprint } | undefined;

  constructor(file: string) {
    this.#db = new DatabaseSync(file, { readOnly: true });
  }

  close(): void {
    this.#db.close();
  }

  fingerprint(cutoff: number): StoreFingerprint {
    // data_version changes when another connection commits: unchanged, the last fingerprint holds.
    const { data_version: version } = this.#db.prepare('PRAGMA data_version').get() as { data_version: number };
    if (this.#cached && this.#cached.version === version && this.#cached.cutoff === cutoff) return this.#cached.fingerprint;
    const groups = new Map<string, string[]>();
    for (const table of this.#tables()) {
      for (const row of this.#rows(table, cutoff)) {
        if (table === 'oidc_models' && BACKGROUND_WRITES.models.has(String(row.model))) continue;
        const group = table === 'oidc_models' ? `${table}:${String(row.model)}` : table;
        let lines = groups.get(group);
        if (!lines) groups.set(group, lines = []);
        lines.push(JSON.stringify(row));
      }
    }
    const fingerprint = new Map([...groups].map(([group, lines]) => {
      lines.sort();
      return [group, { digest: createHash('sha256').update(lines.join('\n')).digest('hex'), rows: lines }] as const;
    }));
    this.#cached = { version, cutoff, fingerprint };
    return fingerprint;
  }

  #tables(): string[] {
    return (this.#db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as Array<{ name: string }>).map(({ name }) => name);
  }

  #rows(table: string, cutoff: number): Array<Record<string, unknown>> {
    const columns = (this.#db.prepare(`PRAGMA table_info(${JSON.stringify(table)})`).all() as Array<{ name: string }>).map(({ name }) => name);
    const kept = columns.filter((column) => !BACKGROUND_WRITES.columns.has(`${table}.${column}`));
    const live = columns.includes('expires_at') ? ` WHERE expires_at IS NULL OR expires_at > ${Math.floor(cutoff)}` : '';
    return this.#db.prepare(`SELECT ${kept.map((c) => JSON.stringify(c)).join(', ')} FROM ${JSON.stringify(table)}${live}`).all() as Array<Record<string, unknown>>;
  }
}

/**
 * The engine's sessions slide: every request it handles with a session cookie saves the session
 * with a new expiry (and so seals it anew), refused or not. That, and only that, is allowed to a
 * request that carried a session cookie: same session, same account, same authorizations.
 */
export function slidingSession(differences: readonly StoreDifference[]): boolean {
  return differences.every(({ group, removed, added }) => {
    if (group !== 'oidc_models:Session' || removed.length !== added.length) return false;
    return added.every((row) => removed.some((old) => sameSessionBut(old, row, ['exp', 'sealed'])));
  });
}

/**
 * A sign-out from a browser without a session: the engine keeps its confirm form's xsrf value in a
 * new session, which lives as long as an interaction (sessionLifetime), never a signed-in two weeks.
 */
export function anonymousLogoutSession(request: RawRequest) {
  return (differences: readonly StoreDifference[], response: RawResponse) =>
    !request.headers?.cookie && response.status === 200
    && differences.every(({ group, removed, added }) => group === 'oidc_models:Session' && removed.length === 0 && added.length === 1 && livesAsAnInteraction(added[0]!));
}

/**
 * A form posted to the authorization or logout endpoint, answered with a 303 to the GET that
 * takes it: that answer writes the form, sealed, one record living a minute, and nothing else.
 */
export function parkedForm(differences: readonly StoreDifference[], response: RawResponse): boolean {
  const location = String(response.headers.location ?? '');
  return response.status === 303 && /\?posted_form=[\w-]{43}$/.test(location)
    && differences.length === 1 && differences.every(({ group, removed, added }) => group === 'oidc_models:PostedForm' && removed.length === 0 && added.length === 1 && livesAMinute(added[0]!));
}

function livesAMinute(row: string): boolean {
  const { expires_at: expiresAt } = JSON.parse(row) as { expires_at?: unknown };
  return typeof expiresAt === 'number' && expiresAt - Date.now() / 1000 <= 61;
}

function livesAsAnInteraction(row: string): boolean {
  const { expires_at: expiresAt } = JSON.parse(row) as { expires_at?: unknown };
  return typeof expiresAt === 'number' && expiresAt - Date.now() / 1000 <= LIFETIMES.Interaction + 5;
}

function sameSessionBut(before: string, after: string, fields: readonly string[]): boolean {
  const was = JSON.parse(before) as Record<string, unknown>;
  const now = JSON.parse(after) as Record<string, unknown>;
  if (was.id !== now.id) return false;
  const payload = (row: Record<string, unknown>) => {
    const parsed = JSON.parse(String(row.payload)) as Record<string, unknown>;
    for (const field of fields) delete parsed[field];
    return JSON.stringify(Object.entries(parsed).sort(([a], [b]) => a.localeCompare(b)));
  };
  const rest = (row: Record<string, unknown>) => JSON.stringify({ ...row, payload: undefined, expires_at: undefined });
  return payload(was) === payload(now) && rest(was) === rest(now);
}

/** One changed table or model: rows gone, rows new (a changed row is one of each). */
export interface StoreDifference {
  group: string;
  removed: string[];
  added: string[];
}

export function storeDifferences(before: StoreFingerprint, after: StoreFingerprint): StoreDifference[] {
  const differences: StoreDifference[] = [];
  for (const group of new Set([...before.keys(), ...after.keys()])) {
    const was = before.get(group);
    const now = after.get(group);
    if (was?.digest === now?.digest) continue;
    const old = new Set(was?.rows ?? []);
    const current = new Set(now?.rows ?? []);
    differences.push({ group, removed: [...old].filter((row) => !current.has(row)), added: [...current].filter((row) => !old.has(row)) });
  }
  return differences;
}

/** The differences in words, with the columns that changed when a row was rewritten. */
export function describeDifferences(differences: readonly StoreDifference[]): string {
  return differences.map(({ group, removed, added }) => {
    if (removed.length === 1 && added.length === 1) return `${group}: a row changed (${changedColumns(removed[0]!, added[0]!)})`;
    return `${group}: ${removed.length} rows gone, ${added.length} new${added.length ? ` (${clip(added[0]!, 200)})` : ''}`;
  }).join('; ');
}

function changedColumns(before: string, after: string): string {
  const was = JSON.parse(before) as Record<string, unknown>;
  const now = JSON.parse(after) as Record<string, unknown>;
  return Object.keys(now).filter((column) => JSON.stringify(was[column]) !== JSON.stringify(now[column]))
    .map((column) => `${column}: ${clip(JSON.stringify(was[column]), 80)} -> ${clip(JSON.stringify(now[column]), 80)}`).join(', ');
}

