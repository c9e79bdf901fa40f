/**
 * Every HTTP exchange a module makes, kept so a failure can show the exact request and response
 * (what an operator needs to fix the server). Secrets the runner itself sends are masked: the
 * password, client secrets, Authorization headers, cookie values. What the server returns is kept as it came.
 */
export interface Exchange {
  request: { method: string; url: string; headers: Record<string, string>; body?: string };
  response?: { status: number; headers: Record<string, string>; body: string };
  /** Set when no response came (connection refused, timeout). */
  error?: string;
}

const SECRET_FIELDS = new Set(['password', 'client_secret']);
const KEPT_RESPONSE_HEADERS = ['content-type', 'location', 'cache-control', 'www-authenticate'];
const BODY_LIMIT = 4000;

export class ExchangeLog {
  readonly #exchanges: Exchange[] = [];

  add(exchange: Exchange): void {
    this.#exchanges.push(exchange);
  }

  last(): Exchange | undefined {
    return this.#exchanges.at(-1);
  }

  all(): readonly Exchange[] {
    return this.#exchanges;
  }
}

export function maskedHeaders(headers: Record<string, string>): Record<string, string> {
  const masked: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    masked[name] = lower === 'authorization' ? maskAuthorization(value) : lower === 'cookie' ? maskCookies(value) : value;
  }
  return masked;
}

/** The names of the OP's cookies the browser sent, not their values (a session is a credential). */
function maskCookies(value: string): string {
  return value.split(';').map((pair) => `${pair.split('=')[0]!.trim()}=…`).join('; ');
}

/** Keeps the scheme and a few characters, enough to tell which credential was sent. */
function maskAuthorization(value: string): string {
  const [scheme = '', credential = ''] = value.split(' ');
  return `${scheme} ${credential.slice(0, 6)}…`;
}

/** A form body with the runner's secrets masked; other bodies as they are. */
export function maskedBody(body: string | undefined, contentType: string | undefined): string | undefined {
  if (body === undefined || !contentType?.includes('application/x-www-form-urlencoded')) return body;
  const form = new URLSearchParams(body);
  for (const name of SECRET_FIELDS) if (form.has(name)) form.set(name, '…');
  return form.toString();
}

export function keptResponseHeaders(headers: Headers): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const name of KEPT_RESPONSE_HEADERS) {
    const value = headers.get(name);
    if (value !== null) kept[name] = value;
  }
  return kept;
}

export function truncated(text: string): string {
  return text.length > BODY_LIMIT ? `${text.slice(0, BODY_LIMIT)}… (${text.length} characters)` : text;
}
