import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import { isAbsolute } from 'node:path';

import { isRedisUrl, parseRedisUrl } from '../adapters/redis/url.ts';
import { DURATION_MAX_DAYS, parseDuration } from './duration.ts';
import type { Rate } from './types.ts';

/**
 * How one variable's value is read and checked. Each parser takes the value (never empty: an
 * empty variable is an unset one) and the variable's name, and throws a ConfigError that starts
 * with that name and says what would be accepted. Values that are secrets are never repeated.
 */

/**
 * A setting that will not do. What else the operator must change before anything can start is one
 * too (a key-encryption key that opens nothing, a port in use): those errors extend this one, and
 * the service and the admin CLI say each as configurationErrorLine does.
 */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

export type Parser<T> = (value: string, name: string) => T;

export const text: Parser<string> = (value) => value;

export const absolutePath: Parser<string> = (value, name) => {
  if (!isAbsolute(value)) throw new ConfigError(`${name} must be an absolute path, got "${value}"`);
  return value;
};

export function choice<T extends string>(choices: readonly T[]): Parser<T> {
  return (value, name) => {
    const match = choices.find((one) => one === value.toLowerCase());
    if (!match) throw new ConfigError(`${name} must be one of ${choices.join(', ')}, got "${value}"`);
    return match;
  };
}

/** `on` or `off`, as true or false. */
export const onOff: Parser<boolean> = (value, name) => {
  if (!/^(on|off)$/i.test(value)) throw new ConfigError(`${name} must be on or off, got "${value}"`);
  return value.toLowerCase() === 'on';
};

/** Where `/metrics` is served: `local` (its own listener), `public` (the service's port) or `off`; `on`, the earlier default, is `local`. */
export const metricsMode: Parser<'local' | 'public' | 'off'> = (value, name) => {
  const mode = value.toLowerCase();
  if (mode === 'on') return 'local';
  if (mode === 'local' || mode === 'public' || mode === 'off') return mode;
  throw new ConfigError(`${name} must be local, public or off, got "${value}"`);
};

/** `90d`, `12h`, `30m`, `45s` or seconds, as seconds. */
export const duration: Parser<number> = (value, name) => {
  const seconds = parseDuration(value);
  if (seconds === undefined) throw new ConfigError(`${name} must be a duration such as 30s, 15m, 12h, 90d or a number of seconds, at most ${DURATION_MAX_DAYS}d, got "${value}"`);
  return seconds;
};

export function atLeast(minimum: number, why: string, parse: Parser<number>): Parser<number> {
  return (value, name) => {
    const seconds = parse(value, name);
    if (seconds < minimum) throw new ConfigError(`${name} must be at least ${minimum}s, ${why}, got "${value}"`);
    return seconds;
  };
}

/** `500ms` or `2s` as milliseconds, from `minimum` to `maximum` ms: a unit is required, a bare number could be read either way. */
export function milliseconds(minimum: number, maximum: number): Parser<number> {
  return (value, name) => {
    const match = /^\s*(\d{1,9})\s*(ms|s)\s*$/i.exec(value);
    const ms = match ? Number(match[1]) * (match[2]!.toLowerCase() === 's' ? 1000 : 1) : Number.NaN;
    if (!(ms >= minimum && ms <= maximum)) {
      throw new ConfigError(`${name} must be a duration with its unit from ${minimum}ms to ${maximum / 1000}s, such as 500ms or 2s, got "${value}"`);
    }
    return ms;
  };
}

/** A whole number from 0 to `maximum`. */
export function wholeNumber(maximum: number): Parser<number> {
  return (value, name) => {
    const number = Number(value);
    if (!/^\s*\d{1,9}\s*$/.test(value) || number > maximum) throw new ConfigError(`${name} must be a whole number from 0 to ${maximum}, got "${value}"`);
    return number;
  };
}

export const port: Parser<number> = (value, name) => {
  const number = Number(value);
  if (!/^\d+$/.test(value) || number < 0 || number > 65535) throw new ConfigError(`${name} must be a whole number from 0 to 65535, got "${value}"`);
  return number;
};

export const workers: Parser<number> = (value, name) => {
  if (value.toLowerCase() === 'auto') return availableParallelism();
  const count = Number(value);
  if (!/^\d+$/.test(value) || count < 1 || count > 64) throw new ConfigError(`${name} must be a whole number from 1 to 64, or "auto" (one per core), got "${value}"`);
  return count;
};

/** Loopback host names as a URL's `hostname` gives them: http is allowed there (RFC 8252 section 7.3, the issuer in development). */
export const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '[::1]']);

/** An issuer identifier (RFC 8414): absolute, https unless on loopback, no query, fragment or credentials. */
export const baseUrl: Parser<{ issuer: string; basePath: string }> = (value, name) => {
  const url = URL.parse(value);
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) throw new ConfigError(`${name} must be an absolute http(s) URL, got "${value}"`);
  if (url.search || url.hash || value.includes('?') || value.includes('#')) {
    throw new ConfigError(`${name} must not have a query or fragment (RFC 8414 issuer identifier)`);
  }
  if (url.username || url.password) throw new ConfigError(`${name} must not contain credentials`);
  // Loopback by address: a name beginning "127." (127.example.com) is anyone's in the DNS.
  if (url.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname) && !/^127(\.\d{1,3}){3}$/.test(url.hostname)) {
    throw new ConfigError(`${name} must use https unless it is a loopback address, got "${value}"`);
  }
  // PORT=0 picks a free port; an issuer on port 0 would name a port no client can reach.
  if (url.port === '0') throw new ConfigError(`${name} must name the port clients reach the service at, not 0, got "${value}" (PORT=0 with BASE_URL unset names the port picked)`);
  const basePath = url.pathname.replace(/\/+$/, '');
  return { issuer: `${url.origin}${basePath}`, basePath };
};

export const storeUrl: Parser<string> = (value, name) => {
  // A path with a space at either end is a slip of quoting far more often than a file's name.
  if (/^sqlite:(\s|.*\s$)/.test(value)) throw new ConfigError(`${name}'s path begins or ends with a space, got "${value}"; a path with spaces inside is fine`);
  // A trailing slash names a directory, which would be taken as the file to create without it.
  if (/^sqlite:.*[/\\]$/.test(value)) throw new ConfigError(`${name} names a directory ("${value}"); name the database file in it, such as ${value}oauth.sqlite`);
  if (value === 'memory:' || /^sqlite:.+/.test(value)) return value;
  if (isRedisUrl(value)) {
    try {
      parseRedisUrl(value);
    } catch (error) {
      throw new ConfigError(`${name} is not a usable Redis URL: ${(error as Error).message}`);
    }
    return value;
  }
  // Credentials in a URL of an unsupported scheme are not repeated into the log.
  const shown = value.replace(/\/\/[^/@]*@/, '//***@');
  throw new ConfigError(`${name} must be "sqlite:<path>", "memory:" or a Redis URL (redis://, rediss://, redis+sentinel://, redis+cluster://), got "${shown}"`);
};

/** false, true (one proxy), or the number of proxies in front. */
export const proxyHops: Parser<number> = (value, name) => {
  if (/^[1-9]$/.test(value)) return Number(value);
  if (/^(1|true|yes|on)$/i.test(value)) return 1;
  if (/^(0|false|no|off)$/i.test(value)) return 0;
  throw new ConfigError(`${name} must be true, false or the number of proxies in front (1-9), got "${value}"`);
};

const REGISTRATION_MODES = { open: 'open', initial_access_token: 'initial_access_token', 'initial-access-token': 'initial_access_token' } as const;

export const registrationMode: Parser<'open' | 'initial_access_token'> = (value, name) => {
  const mode = Object.hasOwn(REGISTRATION_MODES, value.toLowerCase()) ? REGISTRATION_MODES[value.toLowerCase() as keyof typeof REGISTRATION_MODES] : undefined;
  if (!mode) throw new ConfigError(`${name} must be "open" or "initial_access_token", got "${value}"`);
  return mode;
};

/** RFC 6750 b64token characters, long enough not to be guessed. */
const BEARER_TOKEN = /^[A-Za-z0-9._~+/-]{16,256}=*$/;

export const bearerToken: Parser<string> = (value, name) => {
  // The token is never repeated: it is a secret.
  if (!BEARER_TOKEN.test(value)) throw new ConfigError(`${name} must be 16 to 256 characters of A-Z a-z 0-9 - . _ ~ + / (e.g. from: openssl rand -base64 24)`);
  return value;
};

/** 32 random bytes in base64url, as `openssl rand 32 | basenc --base64url | tr -d =` prints them. */
const KEY_ENCRYPTION_KEY = /^[A-Za-z0-9_-]{43}$/;
const KEY_FORMAT = '32 random bytes in base64url (43 characters), e.g. from: openssl rand 32 | basenc --base64url | tr -d =';

export const encryptionKey: Parser<string> = (value, name) => {
  if (!KEY_ENCRYPTION_KEY.test(value)) throw new ConfigError(`${name} must be ${KEY_FORMAT}`);
  return value;
};

export const encryptionKeys: Parser<string[]> = (value, name) => {
  const keys = value.split(',').map((key) => key.trim()).filter(Boolean);
  if (keys.some((key) => !KEY_ENCRYPTION_KEY.test(key))) throw new ConfigError(`${name} must be a comma-separated list of keys, each ${KEY_FORMAT}`);
  return keys;
};

/** A positive number of days (decimals allowed), as seconds. */
export const days: Parser<number> = (value, name) => {
  if (!/^(\d+(\.\d*)?|\.\d+)$/.test(value) || Number(value) <= 0) throw new ConfigError(`${name} must be a positive number of days, got "${value}"`);
  return Math.round(Number(value) * 86_400);
};

const MAX_POINTS = 1_000_000_000;

/** `N/duration`: so many requests per so long (`100/1h`). */
/**
 * The longest a rate limit counts over, or a sign-in lock lasts: the in-process limiter (the
 * embedded store's) ends each with a timer, and a timer holds at most 2^31 ms, about 24.8 days.
 */
export const RATE_WINDOW_MAX_DAYS = 24;

export const rate: Parser<Rate> = (value, name) => {
  const match = /^\s*(\d{1,10})\s*\/\s*(\S+)\s*$/.exec(value);
  const points = Number(match?.[1]);
  const seconds = match ? parseDuration(match[2]!) : undefined;
  if (!match || points < 1 || points > MAX_POINTS || seconds === undefined || seconds > RATE_WINDOW_MAX_DAYS * 86_400) {
    throw new ConfigError(`${name} must be a number of requests per duration, such as 100/1h or 600/1m (durations: 30s, 15m, 1h, 1d or seconds, at most ${RATE_WINDOW_MAX_DAYS}d), got "${value}"`);
  }
  return { points, duration: seconds };
};

/** How long a rate limit's lock lasts: a duration of at most RATE_WINDOW_MAX_DAYS. */
export const rateWindow: Parser<number> = (value, name) => {
  const seconds = parseDuration(value);
  if (seconds === undefined || seconds > RATE_WINDOW_MAX_DAYS * 86_400) {
    throw new ConfigError(`${name} must be a duration such as 30s, 15m, 12h, 7d or a number of seconds, at most ${RATE_WINDOW_MAX_DAYS}d, got "${value}"`);
  }
  return seconds;
};

export const count: Parser<number> = (value, name) => {
  const number = Number(value);
  if (!/^\d{1,10}$/.test(value.trim()) || number < 1 || number > MAX_POINTS) throw new ConfigError(`${name} must be a whole number above 0, got "${value}"`);
  return number;
};

/** The length of an IPv6 network prefix a per-address limit counts as one address. */
export const ipv6Prefix: Parser<number> = (value, name) => {
  const number = Number(value);
  // Shorter than a /32 (an ISP's usual allocation) would count a whole provider's customers as one.
  if (!/^\d{1,3}$/.test(value.trim()) || number < 32 || number > 128) {
    throw new ConfigError(`${name} must be a prefix length from 32 to 128 (64: one subscriber's network), got "${value}"`);
  }
  return number;
};

/** Comma-separated values, each read by `parse` (an empty list is no list). */
export function list<T>(parse: Parser<T>): Parser<T[]> {
  return (value, name) => value.split(',').map((item) => item.trim()).filter(Boolean).map((item) => parse(item, name));
}

/** A name to show people: 1 to 60 characters, no control characters. */
export const serviceName: Parser<string> = (value, name) => {
  const trimmed = value.trim();
  if (!trimmed) throw new ConfigError(`${name} must name the service (1 to 60 characters), not be blank`);
  if (trimmed.length > 60 || /[\u0000-\u001f\u007f]/.test(trimmed)) throw new ConfigError(`${name} must be 1 to 60 characters, without control characters`);
  return trimmed;
};

/** A host a Content-Security-Policy may name as it is: a DNS name or an address, nothing the URL parser merely lets through. */
const PLAIN_HOST = /^(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*\.?|\[[0-9a-f:.]+\])$/;

/** An absolute https URL without credentials or fragment, whose host can be written into a policy. */
function isPlainHttpsUrl(url: URL | null): url is URL {
  return url !== null && url.protocol === 'https:' && !url.username && !url.password && !url.hash && PLAIN_HOST.test(url.hostname);
}

export const httpsUrl: Parser<string> = (value, name) => {
  const url = URL.parse(value);
  if (!isPlainHttpsUrl(url)) throw new ConfigError(`${name} must be an https URL such as https://example.com/docs (no credentials or fragment), got "${value}"`);
  return url.href;
};

/** An https URL (as httpsUrl), or a path on the issuer's host (`/brand/logo.svg`), kept as the path and query. */
export const imageUrl: Parser<string> = (value, name) => {
  const path = value.startsWith('/') && !value.startsWith('//') && !value.includes('\\') ? URL.parse(value, 'https://host.invalid') : null;
  if (path && path.host === 'host.invalid' && !path.hash) return `${path.pathname}${path.search}`;
  const url = URL.parse(value);
  if (isPlainHttpsUrl(url)) return url.href;
  throw new ConfigError(`${name} must be an https URL (https://cdn.example.com/logo.svg) or a path starting with / (/brand/logo.svg), got "${value}"`);
};

/**
 * An http(s) origin: scheme, host and port, nothing else (`https://app.example.com`), kept as a
 * browser sends it in `Origin` (scheme and host in lower case, whatever case they were written in).
 */
export const origin: Parser<string> = (value, name) => {
  const url = URL.parse(value);
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:') || url.origin !== value.replace(/\/$/, '').toLowerCase()) {
    throw new ConfigError(`${name} must be origins such as https://app.example.com (scheme, host and port only), got "${value}"`);
  }
  return url.origin;
};

/** `host:port`, the host a name or an address (IPv6 in brackets). */
export const hostPort: Parser<string> = (value, name) => {
  const url = URL.parse(`https://${value}`);
  if (!url || !/:\d+$/.test(value) || url.host !== value.toLowerCase() || url.pathname !== '/') {
    throw new ConfigError(`${name} must be host:port pairs such as cimd.internal:8443 or [::1]:8443, got "${value}"`);
  }
  return url.host;
};

/** A domain name (`example.com`): itself and its subdomains. */
export const domain: Parser<string> = (value, name) => {
  const lower = value.toLowerCase().replace(/\.$/, '');
  if (!/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/.test(lower)) {
    throw new ConfigError(`${name} must be domain names such as example.com, got "${value}"`);
  }
  return lower;
};

/** `off`, or what `parse` reads; its refusal says `off` is taken too. */
export function orOff<T>(parse: Parser<T>): Parser<T | undefined> {
  return (value, name) => {
    if (value.toLowerCase() === 'off') return undefined;
    try {
      return parse(value, name);
    } catch (error) {
      if (error instanceof ConfigError) throw new ConfigError(`${error.message}; it may also be off`);
      throw error;
    }
  };
}

/** A host name's shape (RFC 1123): labels of letters, digits and inner hyphens; their lengths are the resolver's to check. */
const HOST_NAME = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.?$/i;

/**
 * An address to listen on: an IP address (an IPv6 one with or without its brackets) or a host
 * name, never with a port (that is a setting of its own). Read here so that a mistaken one stops
 * the start before anything is written; a name that does not resolve is only found at listen.
 */
export const listenHost: Parser<string> = (value, name) => {
  const host = value.trim();
  const unbracketed = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (isIP(unbracketed)) return unbracketed;
  // Digits and dots only read as an IPv4 address, which this is not (999.1.1.1).
  if (HOST_NAME.test(host) && !/^[\d.]+$/.test(host)) return host;
  throw new ConfigError(`${name} must be an IP address or a host name to listen on, without a port, got "${value.slice(0, 100)}"`);
};
