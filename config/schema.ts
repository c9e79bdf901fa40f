import { LIFETIMES, MIN_PREPUBLISH_SECONDS } from './lifetimes.ts';
import {
  absolutePath, atLeast, baseUrl, bearerToken, choice, count, days, domain, duration, encryptionKey, encryptionKeys, hostPort, httpsUrl, imageUrl, ipv6Prefix, list, listenHost, metricsMode, milliseconds, onOff, origin, orOff, type Parser, port, proxyHops, rate, rateWindow, registrationMode, serviceName, storeUrl, text, wholeNumber, workers,
} from './parsers.ts';
import { SQLITE_SYNCHRONOUS } from '../adapters/store.ts';
import type { LogLevel, PkcePolicy } from './types.ts';

/**
 * Every environment variable the service reads: its default, what it means (the operator guide's
 * Configuration table is generated from this: `npm run config:table -- --write`) and how its
 * value is read and checked. Rules between variables are in config/index.ts. An empty variable is
 * an unset one.
 */

export interface Variable<T> {
  /** The value used when the variable is unset; undefined: none. */
  readonly default: string | undefined;
  /** The operator guide's Default column (Markdown); the default itself when not given. */
  readonly shownDefault: string | undefined;
  /** The operator guide's Meaning column (Markdown). */
  readonly meaning: string;
  /** The variable's value from `env`, parsed and checked (the default when unset). */
  read(env: Env, name: string): T;
}

export type Env = Readonly<Record<string, string | undefined>>;

function given(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

/** A variable with a default. */
function withDefault<T>(fallback: string, meaning: string, parse: Parser<T>, shownDefault?: string): Variable<T> {
  return { default: fallback, shownDefault, meaning, read: (env, name) => parse(given(env, name) ?? fallback, name) };
}

/** A variable that may be left unset (undefined). */
function optional<T>(meaning: string, parse: Parser<T>, shownDefault = '—'): Variable<T | undefined> {
  return {
    default: undefined,
    shownDefault,
    meaning,
    read: (env, name) => {
      const value = given(env, name);
      return value === undefined ? undefined : parse(value, name);
    },
  };
}

/** `61m` for 3660 seconds: the unit the operator guide uses. */
function durationText(seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600}h`;
  return seconds % 60 === 0 ? `${seconds / 60}m` : `${seconds}s`;
}

/** The longest-lived JWT the service signs (access and ID tokens, signed userinfo) plus a minute of clock skew. */
const DEFAULT_KEY_RETENTION = Math.max(LIFETIMES.AccessToken, LIFETIMES.ClientCredentials, LIFETIMES.IdToken) + 60;

const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error', 'silent'];
const PKCE_POLICIES: readonly PkcePolicy[] = ['all', 'public'];

/*
 * Rate limit defaults are for one instance's traffic: a registration every few minutes from one
 * address, an application's users refreshing through one client, a person mistyping a password.
 */

/** In the order of the operator guide's table. */
export const SCHEMA = {
  BASE_URL: optional(
    'The issuer. `https` unless on loopback; may have a path (`https://example.com/auth`), in which case the service serves that path',
    baseUrl, '`http://localhost:$PORT`',
  ),
  PORT: withDefault('3000', 'Port to listen on; `0` picks a free one, logged at start, which the default `BASE_URL` then names', port),
  HOST: optional('Address to listen on: an IP address or a host name, without a port', listenHost, 'all interfaces'),
  WORKERS: withDefault(
    '1',
    'Processes serving requests on the same port (`node:cluster`), over the one store (a `sqlite:` file or Redis; not `memory:`, each process\'s own); `auto` runs one per core. A worker that dies is replaced, after 1 s, twice as long for each in a row that dies within a minute of starting (up to a minute); one that cannot start for a configuration error (a port in use) stops them all, with its one line. Each is an instance in the sense of [How tokens are revoked](#how-tokens-are-revoked). On the embedded SQLite store the workers take turns at its one writer, each serving other requests while it waits ([Another process holding the SQLite write lock](failure-modes.md#another-process-holding-the-sqlite-write-lock)): tokens that write nothing (client_credentials) gain from more workers, code exchanges and refreshes about match one worker, at a higher p99 ([measured](performance.md#where-it-stands)); for writes on many cores, use Redis',
    workers,
  ),
  STORE: withDefault(
    'sqlite:./data/oauth.sqlite',
    'Storage: `sqlite:<path>` (embedded), `redis://…`, `rediss://…`, `redis+sentinel://…`, `redis+cluster://…` (see [Production on Redis](#production-on-redis)), or `memory:` (gone on exit; tests)',
    storeUrl,
  ),
  REDIS_WAIT_REPLICAS: withDefault(
    '0',
    'Redis only: a write is acknowledged only once this many replicas hold it (Redis `WAIT` on the node that made it), so a failover to one of them cannot lose it: a code or refresh token used up, a token or client issued, a revocation, an API key, a key rotation. When they do not confirm within `REDIS_WAIT_TIMEOUT`, the request answers `503` with `Retry-After` and hands out nothing. `0`: off (Redis replicates asynchronously: a failover may lose the last writes). See [Failure modes](failure-modes.md#redis-failover)',
    wholeNumber(100),
  ),
  REDIS_WAIT_TIMEOUT: withDefault(
    '500ms',
    'How long a write waits for `REDIS_WAIT_REPLICAS` replicas before it is refused with `503`: `500ms`, `2s` (1ms to 10s). A healthy replica on the same network confirms within a round trip',
    milliseconds(1, 10_000),
  ),
  SQLITE_SYNCHRONOUS: withDefault(
    'normal',
    'SQLite only. `normal`: every acknowledged write survives the process being killed, but the last ones may be lost if the machine loses power or the OS crashes; `full`: they survive that too, for an fsync per commit. See [Failure modes](failure-modes.md#sqlite-crashes-and-power-loss)',
    choice(SQLITE_SYNCHRONOUS),
  ),
  SERVICE_NAME: withDefault(
    'Workspace OAuth server',
    'The name every page shows in its header, and the home page (`BASE_URL`) in its title: 1 to 60 characters',
    serviceName,
  ),
  SERVICE_LOGO_URL: optional(
    'A logo shown beside `SERVICE_NAME` on every page: an `https` URL, or a path on `BASE_URL`\'s host (`/brand/logo.svg`, served by what stands in front of the service). The pages\' Content-Security-Policy allows images from its origin alone',
    imageUrl, '— (the name alone)',
  ),
  SERVICE_DOCUMENTATION_URL: optional(
    'An `https` page the home page links to as the documentation (for example where this project\'s API guide is published)',
    httpsUrl, '— (no link)',
  ),
  REGISTRATION: withDefault(
    'open',
    '`open`: anyone may register (an initial access token is optional and binds the client to a workspace); `initial_access_token`: every registration needs one',
    registrationMode,
  ),
  REGISTRATION_ACCESS_TOKEN_TTL: optional(
    'How long an RFC 7592 registration access token lasts: `90d`, `12h`, `30m` or seconds. Each update issues a new one with the whole lifetime; a client that lets its token expire can no longer read, update or delete its registration (an operator can still `client delete` it)',
    duration, '— (as long as its client)',
  ),
  UNUSED_CLIENT_TTL: withDefault(
    '30d',
    'How long a client that registered itself may go without obtaining a token before it is removed, with its registration access token: `90d`, `12h`, `30m`, seconds, or `off`. Its first token keeps it for good; an RFC 7592 update does not extend the period. Clients registered with an initial access token are never removed. This bounds what a registration flood can leave in the store',
    orOff(duration),
  ),
  REFRESH_TOKEN_ABSOLUTE_LIFETIME: withDefault(
    '365d',
    'How long a grant\'s refresh tokens last in all, however often they rotate: `365d`, `90d`, `12h` or seconds, at least `1h`. Each refresh token also lapses after 30 days unused (a FAPI 2.0 client\'s, never rotated, lasts this whole lifetime, used or not); after this lifetime the user must sign in to the client again. A grant (the consent) is kept at least as long',
    atLeast(3600, 'so a client has time to use its refresh token', duration),
  ),
  PKCE_REQUIRED: withDefault(
    'all',
    '`all`: every authorization request needs PKCE (S256). `public`: public clients and plain OAuth requests still do; a confidential client\'s OpenID Connect request (scope `openid`) may omit it (RFC 9700 2.1.1). Set `public` for an OpenID Foundation conformance run: its plans send no PKCE. `plain` is refused and a challenge must be redeemed with its verifier under either',
    choice(PKCE_POLICIES),
  ),
  PAR_REQUIRED: withDefault(
    'off',
    '`on`: every authorization request must be pushed first (RFC 9126, `POST /oauth/par`), for every client, those registered before too (the settings area\'s sign-in, which the service makes itself, excepted), and discovery says so; `off`: a client registered with `require_pushed_authorization_requests: true` must push its own, others may. Pushing keeps the request\'s parameters off the browser\'s address bar and lets the client authenticate it. See [Pushed authorization requests](api-guide.md#pushed-authorization-requests-par)',
    onOff,
  ),
  DPOP_REQUIRED: withDefault(
    'off',
    '`on`: the data API and `/mcp` accept DPoP-bound access tokens only (RFC 9449): the token endpoint issues no token for them without a DPoP proof, and they refuse a plain bearer token. A stolen token is then useless without the client\'s key. API keys are not OAuth tokens and still work. `off`: both kinds are accepted. An API an operator registers chooses for itself (`admin resource-server create --require-dpop`). See [DPoP](api-guide.md#dpop-sender-constrained-tokens)',
    onOff,
  ),
  DPOP_NONCE_REQUIRED: withDefault(
    'off',
    '`on`: every DPoP proof, at the token endpoint and at the APIs, must carry a nonce this server handed out (`DPoP-Nonce`; a proof without one is answered `use_dpop_nonce` with a fresh nonce). `off`: a proof whose `iat` is within 5 minutes of the server clock, either way (the window the engine keeps), is enough, and a nonce is asked for only when it is not. Nonces bound how long a proof made in advance stays usable. See [DPoP](api-guide.md#dpop-sender-constrained-tokens)',
    onOff,
  ),
  FAPI: withDefault(
    'off',
    '`on`: every client that obtains tokens is held to the FAPI 2.0 Security Profile: it authenticates with `private_key_jwt` (PS256, ES256 or EdDSA), pushes every authorization request (PAR) with PKCE S256, and gets DPoP-bound tokens only; a registration or a stored client that does not meet it is refused. `off`: only clients an operator made FAPI clients are (registered with an initial access token created with `--fapi`). See [FAPI 2.0](#fapi-20-security-profile)',
    onOff,
  ),
  CIMD: withDefault(
    'on',
    '`off` turns Client ID Metadata Documents off: a `client_id` that is an https URL is then unknown, and registration refuses a `jwks_uri` (the server then fetches nothing). See [Client ID Metadata Documents](#client-id-metadata-documents)',
    onOff,
  ),
  CIMD_TRUSTED_HOSTS: optional(
    'Comma-separated `host:port` of metadata documents that may be fetched on a private or loopback address (development, tests, an internal deployment); every other `client_id` URL must resolve to public addresses only. Logged at start',
    list(hostPort), '— (public addresses only)',
  ),
  CIMD_ALLOWED_DOMAINS: optional(
    'Comma-separated domains whose URLs (the domain and its subdomains) may act as clients with a metadata document; others are refused',
    list(domain), '— (any)',
  ),
  MCP_ALLOWED_ORIGINS: optional(
    'Comma-separated origins (`https://app.example.com`) of browser pages that may call `/mcp`, besides `BASE_URL`\'s own; a request from any other page is refused (DNS rebinding protection)',
    list(origin), '— (`BASE_URL`\'s only)',
  ),
  RATE_LIMITS: withDefault('on', '`off` turns every limit below off (load tests); see [Rate limits](#rate-limits)', onOff),
  RATE_LIMIT_REGISTRATION: withDefault('100/1h', 'Client registrations per client address, as `N/duration` (`30s`, `15m`, `1h`, `1d` or seconds; at most `24d`, the longest any rate limit counts over)', rate),
  RATE_LIMIT_TOKEN_CLIENT: withDefault('1200/1m', 'Tokens issued per `client_id` (refused requests do not count, so no one can use up a client\'s allowance with its public id)', rate),
  RATE_LIMIT_TOKEN_ADDRESS: withDefault('1200/1m', 'Token requests per client address', rate),
  RATE_LIMIT_LOGIN_ADDRESS: withDefault('50/15m', 'Failed sign-ins per client address; past them no one signs in from that address until the window ends', rate),
  RATE_LIMIT_LOGIN_ACCOUNT: withDefault('5', 'Consecutive failed sign-ins to one account (email) before it is locked', count),
  RATE_LIMIT_LOGIN_LOCK: withDefault('1m', 'The first lock; each further failure doubles it', rateWindow),
  RATE_LIMIT_LOGIN_LOCK_MAX: withDefault('1h', 'The longest lock (at least `RATE_LIMIT_LOGIN_LOCK`, at most 24d)', rateWindow),
  RATE_LIMIT_DATA_API: withDefault('600/1m', 'Data API and `/mcp` requests per credential (each message of a JSON-RPC batch at `/mcp` counts as one)', rate),
  RATE_LIMIT_CREDENTIAL_ADDRESS: withDefault(
    '30/1m',
    'Failed credentials per client address: bearer tokens and API keys refused at the data API, `/mcp` and userinfo, and failed client authentication at introspection. Past them a failing request gets `429` instead of `401`; a valid credential from the same address is still served',
    rate,
  ),
  RATE_LIMIT_INTERACTION_ADDRESS: withDefault(
    '60/10m',
    'Authorization requests per client address that open a sign-in or consent page (each keeps an interaction record for 10 minutes); past them such a request gets the error page with `429`. Counted apart at the same rate: forms posted to the authorization and logout endpoints (each kept a minute for the GET that follows)',
    rate,
  ),
  RATE_LIMIT_IPV6_PREFIX: withDefault(
    '64',
    'The IPv6 prefix length every per-address limit counts as one address (32 to 128): a subscriber is routed a whole /64 or more. An IPv4-mapped address (`::ffff:192.0.2.1`) counts as its IPv4 address',
    ipv6Prefix,
  ),
  TRUST_PROXY: withDefault(
    'false',
    'How many reverse proxies stand in front: `false` (none; also `0`, `no`, `off`), `true` (one; also `yes`, `on`) or a number from 1 to 9. The client address is then read from `X-Forwarded-For`, that many entries from the right (logs, rate limits); never the host: every URL the service emits (discovery, `registration_client_uri`, redirects) comes from `BASE_URL` whatever `Host` or `X-Forwarded-Host` a request names (or the authority of a request line in absolute form, `GET https://other.example/path`, which is read as its path), and a page (home, sign-in, consent, settings, authorization, sign-out) asked for under another name for `BASE_URL`\'s port (`127.0.0.1` for `localhost`; with `TRUST_PROXY`, the proxy\'s `X-Forwarded-Host`) is redirected (302) to the same path on `BASE_URL`; a `Host` naming another port (the proxy\'s upstream address) is answered as `BASE_URL`. With an `https` `BASE_URL` every cookie is `Secure` and HSTS is sent (`max-age=31536000; includeSubDomains`: serve every subdomain of the issuer\'s host over https), proxy header or not',
    proxyHops,
  ),
  LOG_LEVEL: withDefault(
    'info',
    '`debug`, `info`, `warn`, `error`, `silent`. Logs are JSON lines on stderr (readable `time LEVEL message key=value` lines when stderr is a terminal), each with the `request_id` of the request it was written for, never with secrets, passwords or tokens',
    choice(LOG_LEVELS),
  ),
  METRICS: withDefault(
    'local',
    'Where `/metrics` is served. `local`: on a listener of its own, `METRICS_HOST`:`METRICS_PORT` (loopback), never on `PORT`; `public`: on `PORT` with the service, to whoever reaches it (set `METRICS_TOKEN`); `off`: nowhere. `on` is read as `local`. See [Monitoring](#monitoring)',
    metricsMode,
  ),
  METRICS_HOST: withDefault('127.0.0.1', 'Address of the metrics listener (`METRICS=local`): loopback, for a Prometheus or an agent on the same host; a private address or `0.0.0.0` to be scraped from elsewhere (then set `METRICS_TOKEN`, or keep the port off every public network)', listenHost),
  METRICS_PORT: withDefault(
    '9464',
    'Port of the metrics listener (`METRICS=local`), not `PORT`; 9464 is the port of OpenTelemetry\'s Prometheus exporter. A second instance on the same host needs its own; `0` picks a free one, logged at start',
    port,
  ),
  METRICS_TOKEN: optional(
    'When set, `/metrics` answers only requests with `Authorization: Bearer <METRICS_TOKEN>` (16 to 256 characters of `A-Z a-z 0-9 - . _ ~ + /`, e.g. `openssl rand -base64 24`), wherever it is served. Without it, anyone who reaches the metrics can read them (they hold no ids or secrets, but do show traffic): needed with `METRICS=public`, and with a `METRICS_HOST` others can reach',
    bearerToken, '— (no token)',
  ),
  JWKS_FILE: optional(
    'A private JWKS (one P-256 key for access tokens, one RSA key of 2048 bits or more for ID tokens; each kid its own, no key for use "enc") to use instead of generated keys; the service never rotates them',
    text,
  ),
  KEY_ENCRYPTION_KEY: optional(
    'The key-encryption key (32 random bytes, base64url: `openssl rand 32 | basenc --base64url | tr -d =`) that seals the signing and cookie keys and the few secret fields of stored records. Keep it outside the store and its backups',
    encryptionKey,
  ),
  KEY_ENCRYPTION_KEY_FILE: optional(
    'A file holding that key instead (one other users can read is used, with a warning at every start to make it owner-only: `chmod 600`). With neither set, the embedded store creates one at first start outside its data directory, in `$XDG_CONFIG_HOME/workspace-oauth-server/key-encryption.key` (`~/.config/…` without `XDG_CONFIG_HOME`; owner-only), and logs where; an `https` `BASE_URL` needs one of the two set. A key an earlier version made beside the database (`./data/oauth.kek`) is still read in development, with a warning to move it; with an `https` `BASE_URL` the service stops and says to move it and name it here. `memory:` makes one per run. See [What a copy of the store holds](#what-a-copy-of-the-store-holds)',
    text, '— (created under the user\'s config directory)',
  ),
  XDG_CONFIG_HOME: optional(
    'The user\'s configuration directory (an absolute path), where the embedded store\'s key-encryption key is created when `KEY_ENCRYPTION_KEY_FILE` is not set',
    absolutePath, '— (`~/.config`)',
  ),
  KEY_ENCRYPTION_KEY_PREVIOUS: optional(
    'Comma-separated earlier keys, still accepted after a rotation (see [What a copy of the store holds](#what-a-copy-of-the-store-holds))',
    encryptionKeys,
  ),
  KEY_PREPUBLISH: withDefault(
    '1h',
    'How long a new signing key is published in the JWKS before it signs (at least `3s`, so every instance has it first): longer than resource servers cache the JWKS. See [Rotating the signing keys](#rotating-the-signing-keys)',
    atLeast(MIN_PREPUBLISH_SECONDS, 'so every instance has a new key before it signs', duration),
  ),
  KEY_RETENTION: withDefault(
    durationText(DEFAULT_KEY_RETENTION),
    'How long a replaced signing key stays in the JWKS and keeps verifying after it stops signing: the longest token lifetime (1 h) plus clock skew. Shorter refuses the tokens it signed before they expire',
    duration,
  ),
  KEY_ROTATION_DAYS: optional(
    'Rotate the signing keys by themselves every this many days (decimals allowed); longer than `KEY_PREPUBLISH`; not with `JWKS_FILE`',
    days, '— (only `keys rotate`)',
  ),
} satisfies Record<string, Variable<unknown>>;

export type VariableName = keyof typeof SCHEMA;

/** The value of one variable, parsed and checked. */
export function read<K extends VariableName>(env: Env, name: K): ReturnType<(typeof SCHEMA)[K]['read']> {
  return SCHEMA[name].read(env, name) as ReturnType<(typeof SCHEMA)[K]['read']>;
}
