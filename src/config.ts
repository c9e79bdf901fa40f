import { availableParallelism } from 'node:os';

import { isRedisUrl, parseRedisUrl } from '../adapters/redis_url.ts';
import { parseDuration } from './cli/duration.ts';
import { LIFETIMES } from './oauth/lifetimes.ts';

/**
 * Service configuration: read from the environment once, at start, validated, then passed down.
 * A bad value stops the service with a message that names the variable.
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
export type RegistrationMode = 'open' | 'initial_access_token';
/** `all`: every authorization request needs PKCE. `public`: a confidential client's OpenID Connect request may omit it. */
export type PkcePolicy = 'all' | 'public';

export interface Config {
  /** The issuer identifier: BASE_URL without a trailing slash, e.g. `https://auth.example.com/auth`. */
  readonly issuer: string;
  /** The issuer's path ('' at the host root, `/auth` when the service is mounted below a path). */
  readonly basePath: string;
  readonly port: number;
  /** Listen address; undefined listens on every interface. */
  readonly host: string | undefined;
  /** Processes serving requests (node:cluster) over the one shared store; 1 serves from this process. */
  readonly workers: number;
  /** Storage URL: `sqlite:<path>`, `memory:`, or Redis (`redis://`, `rediss://`, `redis+sentinel://`, `redis+cluster://`). */
  readonly store: string;
  /**
   * How many reverse proxies stand in front (0: none). Their X-Forwarded-For (the client address,
   * counted from the right) and X-Forwarded-Proto are believed; the host never is (URLs come from BASE_URL).
   */
  readonly proxyHops: number;
  readonly logLevel: LogLevel;
  /** Prometheus metrics at `/metrics` (src/server/metrics/); undefined with METRICS=off. */
  readonly metrics: MetricsSettings | undefined;
  readonly registration: RegistrationMode;
  /**
   * Seconds a registration access token (RFC 7592) lives; each update issues a new one with this
   * lifetime. Undefined: it lives as long as its client (REGISTRATION_ACCESS_TOKEN_TTL).
   */
  readonly registrationAccessTokenTtl: number | undefined;
  /**
   * Seconds a client that registered itself may go without obtaining a token before it is removed
   * (src/oauth/unused_clients.ts); undefined with UNUSED_CLIENT_TTL=off.
   */
  readonly unusedClientTtl: number | undefined;
  /** Which authorization requests must use PKCE (src/oauth/pkce.ts). */
  readonly pkceRequired: PkcePolicy;
  /** Rate limits (src/server/rate_limits/); undefined with RATE_LIMITS=off. */
  readonly rateLimits: RateLimits | undefined;
  /** Private JWKS file supplied by the operator instead of generated keys. */
  readonly jwksFile: string | undefined;
  /**
   * The key-encryption key that seals the stored signing and cookie keys: given inline
   * (KEY_ENCRYPTION_KEY) or in a file (KEY_ENCRYPTION_KEY_FILE). Undefined: the embedded store
   * keeps one in a file beside its database, created at first start; `memory:` makes one per run.
   */
  readonly keyEncryptionKey: { value: string } | { file: string } | undefined;
  /** Earlier key-encryption keys, still accepted for values sealed before a rotation (KEY_ENCRYPTION_KEY_PREVIOUS). */
  readonly previousKeyEncryptionKeys: readonly string[];
  /** Signing-key rotation (src/oauth/key_rotation.ts). */
  readonly keyRotation: KeyRotationPolicy;
}

export interface MetricsSettings {
  /** METRICS_TOKEN: the bearer token a scrape must present; undefined: anyone who reaches the port may scrape. */
  readonly token: string | undefined;
}

export interface KeyRotationPolicy {
  /** KEY_PREPUBLISH: seconds a new signing key is published before it signs. */
  readonly prepublishSeconds: number;
  /** KEY_RETENTION: seconds a replaced key stays published and verifying after it stops signing. */
  readonly retentionSeconds: number;
  /** KEY_ROTATION_DAYS, in seconds: how long each key signs before the service rotates on its own; undefined: only `keys rotate` does. */
  readonly everySeconds: number | undefined;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error', 'silent'];
const PKCE_POLICIES: readonly PkcePolicy[] = ['all', 'public'];
const REGISTRATION_MODES: Record<string, RegistrationMode> = {
  open: 'open',
  initial_access_token: 'initial_access_token',
  'initial-access-token': 'initial_access_token',
};
const DEFAULT_STORE = 'sqlite:./data/oauth.sqlite';

type Env = Readonly<Record<string, string | undefined>>;

export function loadConfig(env: Env = process.env): Config {
  const port = parsePort(env.PORT);
  const { issuer, basePath } = parseBaseUrl(env.BASE_URL ?? `http://localhost:${port}`);
  return {
    issuer,
    basePath,
    port,
    host: env.HOST || undefined,
    workers: parseWorkers(env.WORKERS),
    store: parseStore(env.STORE ?? DEFAULT_STORE),
    proxyHops: parseProxyHops(env.TRUST_PROXY),
    logLevel: parseChoice('LOG_LEVEL', env.LOG_LEVEL, LOG_LEVELS, 'info'),
    metrics: parseMetrics(env.METRICS, env.METRICS_TOKEN),
    registration: parseRegistration(env.REGISTRATION),
    registrationAccessTokenTtl: parseOptionalDuration('REGISTRATION_ACCESS_TOKEN_TTL', env.REGISTRATION_ACCESS_TOKEN_TTL),
    unusedClientTtl: env.UNUSED_CLIENT_TTL === 'off' ? undefined : parseOptionalDuration('UNUSED_CLIENT_TTL', env.UNUSED_CLIENT_TTL || '30d'),
    pkceRequired: parseChoice('PKCE_REQUIRED', env.PKCE_REQUIRED, PKCE_POLICIES, 'all'),
    rateLimits: parseRateLimits(env),
    jwksFile: env.JWKS_FILE || undefined,
    keyEncryptionKey: parseKeyEncryptionKey(env.KEY_ENCRYPTION_KEY, env.KEY_ENCRYPTION_KEY_FILE),
    previousKeyEncryptionKeys: parsePreviousKeys(env.KEY_ENCRYPTION_KEY_PREVIOUS),
    keyRotation: parseKeyRotation(env),
  };
}

/** Seconds an instance may take to see a new key (key_rotation.ts MIN_PREPUBLISH_SECONDS): a key is published at least this long before it signs. */
const MIN_KEY_PREPUBLISH = 3;
/** The longest-lived JWT the service signs (access and ID tokens, signed userinfo) plus a minute of clock skew. */
const DEFAULT_KEY_RETENTION = Math.max(LIFETIMES.AccessToken, LIFETIMES.ClientCredentials, LIFETIMES.IdToken) + 60;

function parseKeyRotation(env: Env): KeyRotationPolicy {
  const prepublishSeconds = parseOptionalDuration('KEY_PREPUBLISH', env.KEY_PREPUBLISH) ?? 3600;
  if (prepublishSeconds < MIN_KEY_PREPUBLISH) throw new ConfigError(`KEY_PREPUBLISH must be at least ${MIN_KEY_PREPUBLISH}s, so every instance has a new key before it signs, got "${env.KEY_PREPUBLISH}"`);
  const retentionSeconds = parseOptionalDuration('KEY_RETENTION', env.KEY_RETENTION) ?? DEFAULT_KEY_RETENTION;
  const days = env.KEY_ROTATION_DAYS;
  if (days === undefined || days === '') return { prepublishSeconds, retentionSeconds, everySeconds: undefined };
  if (!/^\d+(\.\d+)?$/.test(days) || Number(days) <= 0) throw new ConfigError(`KEY_ROTATION_DAYS must be a positive number of days, got "${days}"`);
  if (env.JWKS_FILE) throw new ConfigError('KEY_ROTATION_DAYS rotates the keys the service generates; the keys of JWKS_FILE are rotated by changing the file');
  const everySeconds = Math.round(Number(days) * 86_400);
  if (everySeconds <= prepublishSeconds) throw new ConfigError(`KEY_ROTATION_DAYS (${everySeconds} s) must be longer than KEY_PREPUBLISH (${prepublishSeconds} s)`);
  return { prepublishSeconds, retentionSeconds, everySeconds };
}

/** 32 random bytes in base64url, as `openssl rand 32 | basenc --base64url | tr -d =` prints them. */
const KEY_ENCRYPTION_KEY = /^[A-Za-z0-9_-]{43}$/;
const KEY_FORMAT = '32 random bytes in base64url (43 characters), e.g. from: openssl rand 32 | basenc --base64url | tr -d =';

function parseKeyEncryptionKey(value: string | undefined, file: string | undefined): Config['keyEncryptionKey'] {
  if (value && file) throw new ConfigError('set KEY_ENCRYPTION_KEY or KEY_ENCRYPTION_KEY_FILE, not both');
  if (file) return { file };
  if (!value) return undefined;
  if (!KEY_ENCRYPTION_KEY.test(value)) throw new ConfigError(`KEY_ENCRYPTION_KEY must be ${KEY_FORMAT}`);
  return { value };
}

function parsePreviousKeys(value: string | undefined): string[] {
  const keys = (value ?? '').split(',').map((key) => key.trim()).filter(Boolean);
  if (keys.some((key) => !KEY_ENCRYPTION_KEY.test(key))) {
    throw new ConfigError(`KEY_ENCRYPTION_KEY_PREVIOUS must be a comma-separated list of keys, each ${KEY_FORMAT}`);
  }
  return keys;
}

function parseWorkers(value: string | undefined): number {
  if (value === undefined || value === '') return 1;
  if (value === 'auto') return availableParallelism();
  const workers = Number(value);
  if (!/^\d+$/.test(value) || workers < 1 || workers > 64) {
    throw new ConfigError(`WORKERS must be a whole number from 1 to 64, or "auto" (one per core), got "${value}"`);
  }
  return workers;
}

function parsePort(value: string | undefined): number {
  if (value === undefined || value === '') return 3000;
  const port = Number(value);
  if (!/^\d+$/.test(value) || port < 0 || port > 65535) {
    throw new ConfigError(`PORT must be a whole number from 0 to 65535, got "${value}"`);
  }
  return port;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

function parseBaseUrl(value: string): { issuer: string; basePath: string } {
  const url = URL.parse(value);
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
    throw new ConfigError(`BASE_URL must be an absolute http(s) URL, got "${value}"`);
  }
  if (url.search || url.hash || value.includes('?') || value.includes('#')) {
    throw new ConfigError('BASE_URL must not have a query or fragment (RFC 8414 issuer identifier)');
  }
  if (url.username || url.password) {
    throw new ConfigError('BASE_URL must not contain credentials');
  }
  if (url.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname) && !url.hostname.startsWith('127.')) {
    throw new ConfigError(`BASE_URL must use https unless it is a loopback address, got "${value}"`);
  }
  const basePath = url.pathname.replace(/\/+$/, '');
  return { issuer: `${url.origin}${basePath}`, basePath };
}

function parseStore(value: string): string {
  if (value === 'memory:' || /^sqlite:.+/.test(value)) return value;
  if (isRedisUrl(value)) {
    try {
      parseRedisUrl(value);
    } catch (error) {
      throw new ConfigError(`STORE is not a usable Redis URL: ${(error as Error).message}`);
    }
    return value;
  }
  // Credentials in a URL of an unsupported scheme are not repeated into the log.
  const shown = value.replace(/\/\/[^/@]*@/, '//***@');
  throw new ConfigError(`STORE must be "sqlite:<path>", "memory:" or a Redis URL (redis://, rediss://, redis+sentinel://, redis+cluster://), got "${shown}"`);
}

/** TRUST_PROXY: false, true (one proxy), or the number of proxies in front. */
function parseProxyHops(value: string | undefined): number {
  if (value !== undefined && /^[1-9]$/.test(value)) return Number(value);
  try {
    return parseBoolean('TRUST_PROXY', value, false) ? 1 : 0;
  } catch {
    throw new ConfigError(`TRUST_PROXY must be true, false or the number of proxies in front (1-9), got "${value}"`);
  }
}

/** RFC 6750 b64token characters, long enough not to be guessed. */
const METRICS_TOKEN = /^[A-Za-z0-9._~+/-]{16,256}=*$/;

function parseMetrics(enabled: string | undefined, token: string | undefined): MetricsSettings | undefined {
  const value = enabled || 'on';
  if (!/^(on|off)$/i.test(value)) throw new ConfigError(`METRICS must be on or off, got "${value}"`);
  // The token is never repeated: it is a secret.
  if (token && !METRICS_TOKEN.test(token)) {
    throw new ConfigError('METRICS_TOKEN must be 16 to 256 characters of A-Z a-z 0-9 - . _ ~ + / (e.g. from: openssl rand -base64 24)');
  }
  return value.toLowerCase() === 'on' ? { token: token || undefined } : undefined;
}

function parseBoolean(name: string, value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === '') return fallback;
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off)$/i.test(value)) return false;
  throw new ConfigError(`${name} must be true or false, got "${value}"`);
}

function parseChoice<T extends string>(name: string, value: string | undefined, choices: readonly T[], fallback: T): T {
  if (value === undefined || value === '') return fallback;
  const match = choices.find((choice) => choice === value.toLowerCase());
  if (!match) throw new ConfigError(`${name} must be one of ${choices.join(', ')}, got "${value}"`);
  return match;
}

function parseOptionalDuration(name: string, value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const seconds = parseDuration(value);
  if (seconds === undefined) throw new ConfigError(`${name} must be a duration such as 90d, 12h, 30m or a number of seconds, got "${value}"`);
  return seconds;
}

function parseRegistration(value: string | undefined): RegistrationMode {
  if (value === undefined || value === '') return 'open';
  const mode = REGISTRATION_MODES[value.toLowerCase()];
  if (!mode) throw new ConfigError(`REGISTRATION must be "open" or "initial_access_token", got "${value}"`);
  return mode;
}

/** So many requests (`points`) per `duration` seconds, from `N/duration` (`100/1h`). */
export interface Rate {
  readonly points: number;
  readonly duration: number;
}

export interface RateLimits {
  /** RATE_LIMIT_REGISTRATION: client registrations per client address. */
  readonly registration: Rate;
  /** RATE_LIMIT_TOKEN_CLIENT: token requests per client_id. */
  readonly tokenPerClient: Rate;
  /** RATE_LIMIT_TOKEN_ADDRESS: token requests per client address. */
  readonly tokenPerAddress: Rate;
  /** RATE_LIMIT_LOGIN_ADDRESS: failed sign-ins per client address; past them the address may not sign in until the window ends. */
  readonly loginPerAddress: Rate;
  /** RATE_LIMIT_LOGIN_ACCOUNT: consecutive failed sign-ins to one account (email) before it is locked. */
  readonly loginFailuresBeforeLock: number;
  /** RATE_LIMIT_LOGIN_LOCK: seconds the first lock lasts; each further failure doubles it, up to loginLockMax (RATE_LIMIT_LOGIN_LOCK_MAX). */
  readonly loginLock: number;
  readonly loginLockMax: number;
  /** RATE_LIMIT_DATA_API: data API requests per credential (a user's token for one client, a client's token, an API key). */
  readonly dataApi: Rate;
}

/**
 * Defaults for one instance's traffic: a registration every few minutes from one address, an
 * application's users refreshing through one client, a person mistyping a password.
 */
const RATE_LIMIT_DEFAULTS = {
  RATE_LIMIT_REGISTRATION: '100/1h',
  RATE_LIMIT_TOKEN_CLIENT: '1200/1m',
  RATE_LIMIT_TOKEN_ADDRESS: '1200/1m',
  RATE_LIMIT_LOGIN_ADDRESS: '50/15m',
  RATE_LIMIT_LOGIN_ACCOUNT: '5',
  RATE_LIMIT_LOGIN_LOCK: '1m',
  RATE_LIMIT_LOGIN_LOCK_MAX: '1h',
  RATE_LIMIT_DATA_API: '600/1m',
} as const;

type RateLimitVariable = keyof typeof RATE_LIMIT_DEFAULTS;

/** Every RATE_LIMIT_* is checked, also with RATE_LIMITS=off, so a typo is found before the limits are turned on. */
function parseRateLimits(env: Env): RateLimits | undefined {
  const value = (name: RateLimitVariable) => env[name] || RATE_LIMIT_DEFAULTS[name];
  const limits: RateLimits = {
    registration: parseRate('RATE_LIMIT_REGISTRATION', value('RATE_LIMIT_REGISTRATION')),
    tokenPerClient: parseRate('RATE_LIMIT_TOKEN_CLIENT', value('RATE_LIMIT_TOKEN_CLIENT')),
    tokenPerAddress: parseRate('RATE_LIMIT_TOKEN_ADDRESS', value('RATE_LIMIT_TOKEN_ADDRESS')),
    loginPerAddress: parseRate('RATE_LIMIT_LOGIN_ADDRESS', value('RATE_LIMIT_LOGIN_ADDRESS')),
    loginFailuresBeforeLock: parseCount('RATE_LIMIT_LOGIN_ACCOUNT', value('RATE_LIMIT_LOGIN_ACCOUNT')),
    loginLock: parseRequiredDuration('RATE_LIMIT_LOGIN_LOCK', value('RATE_LIMIT_LOGIN_LOCK')),
    loginLockMax: parseRequiredDuration('RATE_LIMIT_LOGIN_LOCK_MAX', value('RATE_LIMIT_LOGIN_LOCK_MAX')),
    dataApi: parseRate('RATE_LIMIT_DATA_API', value('RATE_LIMIT_DATA_API')),
  };
  if (limits.loginLockMax < limits.loginLock) {
    throw new ConfigError(`RATE_LIMIT_LOGIN_LOCK_MAX (${limits.loginLockMax}s) must not be shorter than RATE_LIMIT_LOGIN_LOCK (${limits.loginLock}s)`);
  }
  const enabled = env.RATE_LIMITS || 'on';
  if (!/^(on|off)$/i.test(enabled)) throw new ConfigError(`RATE_LIMITS must be on or off, got "${enabled}"`);
  return enabled.toLowerCase() === 'on' ? limits : undefined;
}

const MAX_POINTS = 1_000_000_000;

function parseRate(name: string, value: string): Rate {
  const match = /^\s*(\d{1,10})\s*\/\s*(\S+)\s*$/.exec(value);
  const points = Number(match?.[1]);
  const duration = match ? parseDuration(match[2]!) : undefined;
  if (!match || points < 1 || points > MAX_POINTS || duration === undefined) {
    throw new ConfigError(`${name} must be a number of requests per duration, such as 100/1h or 600/1m (durations: 30s, 15m, 1h, 1d or seconds), got "${value}"`);
  }
  return { points, duration };
}

function parseCount(name: string, value: string): number {
  const count = Number(value);
  if (!/^\d{1,10}$/.test(value.trim()) || count < 1 || count > MAX_POINTS) throw new ConfigError(`${name} must be a whole number above 0, got "${value}"`);
  return count;
}

function parseRequiredDuration(name: string, value: string): number {
  const seconds = parseDuration(value);
  if (seconds === undefined) throw new ConfigError(`${name} must be a duration such as 30s, 15m, 1h or a number of seconds, got "${value}"`);
  return seconds;
}
