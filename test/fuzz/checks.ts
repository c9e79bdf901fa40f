import { errors } from 'oidc-provider';

import { MAX_HEAD_BYTES, send, type RawRequest, type RawResponse } from './http.ts';
import { describeDifferences, storeDifferences, type StoreDifference, type StoreWatch } from './store_snapshot.ts';

/**
 * What every answer to a fuzzed request must be: never a 5xx, never a stack trace or an internal
 * name, the documented error shape (RFC 6749 5.2 / RFC 7591 3.2.2 / RFC 6750 3 JSON, or the
 * error page for browser endpoints), and a store left as it was by a refused request.
 */

export type Surface =
  /** JSON API: a 4xx is `{"error": "...", "error_description"?: "..."}`. */
  | 'json'
  /** RFC 6750 resource: as json, and a 401 or 403 carries a Bearer challenge. */
  | 'bearer'
  /** A browser page: a 4xx is one of the service's pages (error, login or consent), a redirect stays on known ground. */
  | 'html'
  /** Either of the above (a path whose owner the fuzzer does not know). */
  | 'any';

export interface Expectation {
  surface: Surface;
  /** The issuer (redirects to it are fine) and the redirect URIs of the fixtures' clients (redirects there must carry `iss`). */
  issuer: string;
  redirectUris?: readonly string[];
  /** A request the service accepted may change the store (a token issued, a client registered); refusals never may. */
  acceptedMayWrite?: boolean;
  /** Whether the answer is a refusal (default: status 400 and above). */
  refused?: (response: RawResponse) => boolean;
  /** A 404 may come from a route that does not exist (yet): only "no 5xx, no leak" applies to it. */
  missingRoute?: boolean;
  /** An answer that names internals by design (the operator's Prometheus metrics): no leak check for it. */
  showsInternals?: (request: RawRequest, response: RawResponse) => boolean;
  /** What earlier requests stored, which an answer may show back (a record listed later): an echo of it is not a leak. */
  stored?: () => string;
  /** A change a refused request may make by design (said where it is used, and why). */
  allowedChange?: (differences: readonly StoreDifference[], response: RawResponse) => boolean;
}

export class FuzzFailure extends Error {
  override name = 'FuzzFailure';
}

// ---------------------------------------------------------------------------------------------
// Leaks

/** Every error class name the engine has; the service answers with snake_case codes, never these. */
const ENGINE_CLASS_NAMES = Object.keys(errors);

const LEAKS: ReadonlyArray<readonly [what: string, pattern: RegExp]> = [
  ['a stack frame', /\n\s+at \S|\bat (?:async )?[\w$.<>]+ \(|\((?:file|node):[^)]*:\d+:\d+\)/],
  ['a source position', /\.(?:ts|js|mjs|cjs|ejs):\d+/],
  ['a file path of the service', /node_modules|\/src\/|\/adapters\/|\/views\/|\/tmp\/|\/home\//],
  ['an exception text', /\b[A-Z][A-Za-z]*Error\b|\bError: /],
  ['a storage error', /SQLITE_|DatabaseSync|ioredis|ECONNREFUSED|ECONNRESET|WRONGTYPE|NOSCRIPT |\bERR [a-z]/],
  ['a storage error', /\bsqlite\b|constraint failed|no such (?:table|column)|database is locked/i],
  ['an engine class name', new RegExp(`\\b(?:${ENGINE_CLASS_NAMES.join('|')})\\b`)],
  ['an unfilled value', /\bundefined\b|\[object \w+\]|\bNaN\b/],
];

/** Everything the request said, decoded every way the server might have: an echo of it is not a leak. */
export function requestHaystack(request: RawRequest): string {
  const body = request.body === undefined ? undefined : Buffer.from(request.body);
  const parts = [request.path, ...Object.values(request.headers ?? {}).flat()];
  if (body) parts.push(body.toString('latin1'), body.toString('utf8'), body.toString('utf16le'));
  const decoded = parts.map((part) => {
    try {
      return decodeURIComponent(part.replace(/\+/g, ' '));
    } catch {
      // A stray escape (`%FF`) fails the whole part: decode what can be, `+` as a form's space too.
      return part.replace(/\+/g, ' ').replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    }
  });
  return [...parts, ...decoded].join('\n');
}

function leaks(request: RawRequest, response: RawResponse, stored: () => string = () => ''): string[] {
  const answer = [response.text, header(response, 'location') ?? '', header(response, 'www-authenticate') ?? ''].join('\n');
  const haystack = requestHaystack(request);
  const found: string[] = [];
  for (const [what, pattern] of LEAKS) {
    const global = new RegExp(pattern.source, `${pattern.flags.replace('g', '')}g`);
    for (const match of answer.matchAll(global)) {
      // What was stored is read only for a match the request does not explain: it grows with the run.
      if (!haystack.includes(match[0].trim()) && !stored().includes(match[0].trim())) {
        found.push(`${what} (${JSON.stringify(match[0])})`);
        break;
      }
    }
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// Shapes

export function header(response: RawResponse, name: string): string | undefined {
  const value = response.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** RFC 6749 5.2: error codes are %x20-21 / %x23-5B / %x5D-7E; the service's are snake_case. */
const ERROR_CODE = /^[a-z][a-z0-9_]*$/;

/** RFC 6749 4.1.2.1 and 5.2, RFC 6750 3: an error_description is %x20-21 / %x23-5B / %x5D-7E. */
const ERROR_DESCRIPTION = /^[\x20\x21\x23-\x5B\x5D-\x7E]*$/;

function descriptionProblems(where: string, description: string | null | undefined): string[] {
  if (description === null || description === undefined || ERROR_DESCRIPTION.test(description)) return [];
  return [`${where} an error_description with characters RFC 6749 5.2 excludes (${JSON.stringify(description.slice(0, 120))})`];
}

/** Node's HTTP parser refusing a request before any application code ran: a bodiless 4xx. */
export function refusedByHttpLayer(response: RawResponse): boolean {
  return [400, 413, 414, 431].includes(response.status) && response.text === '' && header(response, 'content-type') === undefined;
}

function jsonErrorProblems(response: RawResponse): string[] {
  const type = header(response, 'content-type') ?? '';
  if (!/^application\/json\b/.test(type)) return [`a ${response.status} that is not JSON (Content-Type ${JSON.stringify(type)})`];
  let body: unknown;
  try {
    body = JSON.parse(response.text);
  } catch {
    return ['a JSON Content-Type with a body that does not parse'];
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return ['an error body that is not a JSON object'];
  const { error, error_description: description } = body as Record<string, unknown>;
  const problems: string[] = [];
  if (typeof error !== 'string' || !ERROR_CODE.test(error)) problems.push(`an error code that is not a snake_case string (${JSON.stringify(error)})`);
  if (description !== undefined && typeof description !== 'string') problems.push('an error_description that is not a string');
  if (typeof description === 'string') problems.push(...descriptionProblems('a JSON error with', description));
  return problems;
}

function bearerProblems(response: RawResponse): string[] {
  if (response.status !== 401 && response.status !== 403) return [];
  const challenge = header(response, 'www-authenticate') ?? '';
  if (!/^Bearer\b/.test(challenge)) return [`a ${response.status} without a Bearer challenge (WWW-Authenticate ${JSON.stringify(challenge)})`];
  // A quoted-string's escapes (RFC 9110 5.6.4) are read as a client would, then held to RFC 6750 3.
  const described = /error_description="((?:[^"\\]|\\.)*)"/.exec(challenge)?.[1]?.replace(/\\(.)/g, '$1');
  return descriptionProblems('a challenge with', described);
}

function pageProblems(response: RawResponse): string[] {
  const type = header(response, 'content-type') ?? '';
  if (!/^text\/html\b/.test(type)) return [`a ${response.status} page that is not HTML (Content-Type ${JSON.stringify(type)}): ${response.text.slice(0, 120)}`];
  if (!/<main>[\s\S]*<h1>[\s\S]*<\/main>/.test(response.text)) return ['an HTML answer that is not one of the service\'s pages'];
  return [];
}

/** A redirect stays on the issuer or goes to a registered redirect URI, with `iss` (RFC 9207) and a proper error code if any. */
function redirectProblems(response: RawResponse, expectation: Expectation): string[] {
  const location = header(response, 'location');
  if (!location) return [`a ${response.status} without Location`];
  const target = URL.parse(location, expectation.issuer);
  if (!target) return [`a Location that is no URL (${JSON.stringify(location)})`];
  if (target.href.startsWith(`${expectation.issuer}/`)) {
    // The browser follows it to this server, which refuses a request head over 16 KiB (431, no page).
    return location.length > MAX_HEAD_BYTES - 1024 ? [`a redirect to the service the service would refuse to read (a ${location.length}-character URL)`] : [];
  }
  const registered = (expectation.redirectUris ?? []).some((uri) => `${target.origin}${target.pathname}` === uri);
  if (!registered) return [`a redirect off the issuer to an unregistered address (${JSON.stringify(location)})`];
  const problems: string[] = [];
  const params = new URLSearchParams(target.search);
  if (params.get('iss') !== expectation.issuer) problems.push('a redirect to the client without iss (RFC 9207)');
  const error = params.get('error');
  if (error !== null && !ERROR_CODE.test(error)) problems.push(`a redirect with a malformed error code (${JSON.stringify(error)})`);
  problems.push(...descriptionProblems('a redirect with', params.get('error_description')));
  return problems;
}

/** What a browser sends for a page. */
export const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

/** The request asked for a page rather than JSON (as a browser does). */
function wantsHtml(request: RawRequest): boolean {
  const accept = [request.headers?.accept ?? request.headers?.Accept ?? ''].flat().join(',');
  return /text\/html/i.test(accept) && !/application\/json/i.test(accept);
}

/** What is wrong with an answer, if anything. */
export function responseProblems(request: RawRequest, response: RawResponse, expectation: Expectation): string[] {
  const problems: string[] = [];
  if (response.status >= 500 || response.status < 100) problems.push(`status ${response.status}`);
  if (!expectation.showsInternals?.(request, response)) problems.push(...leaks(request, response, expectation.stored));
  if (expectation.missingRoute && response.status === 404) return problems;
  if (refusedByHttpLayer(response)) return problems;
  // A HEAD answer has the headers of the GET answer and no body to check.
  if (request.method === 'HEAD') return problems;
  const isJson = /^application\/json\b/.test(header(response, 'content-type') ?? '');
  const surface = expectation.surface === 'any' ? (isJson ? 'json' : 'html') : expectation.surface;
  if (response.status >= 300 && response.status < 400) {
    problems.push(...redirectProblems(response, expectation));
  } else if (response.status >= 400 && response.status < 500) {
    // A rate limit answers in its own shape on every surface; a JSON error or a page both do.
    // A browser (Accept naming text/html) gets a page; a client that did not ask for HTML may get JSON (the engine negotiates).
    if (surface === 'html' && isJson && (response.status === 429 || !wantsHtml(request))) problems.push(...jsonErrorProblems(response));
    else if (surface === 'html') problems.push(...pageProblems(response));
    else problems.push(...jsonErrorProblems(response));
    if (surface === 'bearer') problems.push(...bearerProblems(response));
  } else if (isJson) {
    try {
      JSON.parse(response.text);
    } catch {
      problems.push('a JSON Content-Type with a body that does not parse');
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// Probing

/** How long a request may take before the expiry cut-off of its before/after fingerprints matters. */
const CUTOFF_MARGIN_SECONDS = 30;

export interface ProbeResult extends RawResponse {
  refused: boolean;
}

/** Sends fuzzed requests to one server and checks each answer and the store around it. */
export class Prober {
  readonly #origin: string;
  readonly #watch: StoreWatch;
  /** status counts per label, to see how deep the fuzzing got. */
  readonly stats = new Map<string, Map<string, number>>();

  constructor(origin: string, watch: StoreWatch) {
    this.#origin = origin;
    this.#watch = watch;
  }

  async probe(label: string, request: RawRequest, expectation: Expectation): Promise<ProbeResult> {
    // Rows expiring before the cut-off are left out of both fingerprints, so the server's sweep of expired rows is no change.
    const cutoff = Math.floor(Date.now() / 1000) + CUTOFF_MARGIN_SECONDS;
    const before = this.#watch.fingerprint(cutoff);
    const response = await send(this.#origin, request);
    const refused = expectation.refused ? expectation.refused(response) : response.status >= 400;
    this.#count(label, response);
    const problems = responseProblems(request, response, expectation);
    if (refused || !expectation.acceptedMayWrite) {
      const changed = storeDifferences(before, this.#watch.fingerprint(cutoff));
      if (changed.length && !expectation.allowedChange?.(changed, response)) {
        problems.push(`the store changed (${describeDifferences(changed)}) though the request was ${refused ? 'refused' : 'one that writes nothing'}`);
      }
    }
    if (problems.length) throw new FuzzFailure(`${label}: ${problems.join('; ')}\n${describe(request, response)}`);
    return { ...response, refused };
  }

  #count(label: string, response: RawResponse): void {
    let counts = this.stats.get(label);
    if (!counts) this.stats.set(label, counts = new Map());
    let code = '';
    try {
      const body = JSON.parse(response.text) as { error?: unknown; error_description?: unknown };
      if (typeof body.error === 'string') code = ` ${body.error}`;
      if (process.env.FUZZ_STATS === 'detail' && typeof body.error_description === 'string') code += ` (${body.error_description.slice(0, 50)})`;
    } catch {
      const location = header(response, 'location');
      const error = location ? URL.parse(location, this.#origin)?.searchParams.get('error') : undefined;
      if (error) code = ` ->${error}`;
    }
    const key = `${response.status}${code}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }

  summary(): string {
    return [...this.stats].map(([label, counts]) => `${label}: ${[...counts].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} x${n}`).join(', ')}`).join('\n');
  }
}

const clip = (text: string, length = 400) => (text.length > length ? `${text.slice(0, length)}... (${text.length} chars)` : text);

function describe(request: RawRequest, response: RawResponse): string {
  const body = request.body === undefined ? '' : clip(Buffer.from(request.body).toString('latin1'));
  return [
    `request: ${request.method} ${clip(request.path, 300)}`,
    `  headers: ${clip(JSON.stringify(request.headers ?? {}), 300)}`,
    `  body: ${JSON.stringify(body)}`,
    `response: ${response.status} ${JSON.stringify({ 'content-type': header(response, 'content-type'), location: header(response, 'location'), 'www-authenticate': header(response, 'www-authenticate') })}`,
    `  body: ${JSON.stringify(clip(response.text, 600))}`,
  ].join('\n');
}

/** The server's log lines that report a failure: error-level entries and requests answered with a 5xx. */
export function serverErrorsInLog(log: string): string[] {
  return log.split('\n').filter((line) => {
    if (!line.startsWith('{')) return false;
    try {
      const entry = JSON.parse(line) as { level?: unknown; status?: unknown };
      return entry.level === 'error' || entry.level === 'fatal' || (typeof entry.status === 'number' && entry.status >= 500);
    } catch {
      return false;
    }
  });
}
