import type { StoreDurability } from '../adapters/store.ts';

/** The configuration the service runs with, as loadConfig (config/index.ts) hands it down. */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
export type RegistrationMode = 'open' | 'initial_access_token';
/** `all`: every authorization request needs PKCE. `public`: a confidential client's OpenID Connect request may omit it. */
export type PkcePolicy = 'all' | 'public';

export interface ServiceIdentity {
  readonly name: string;
  /** An https URL, or a path on the issuer's host; undefined: the name alone. */
  readonly logoUrl: string | undefined;
  /** An https page the home page links to as the documentation. */
  readonly documentationUrl: string | undefined;
}

export interface Config {
  /** The issuer identifier: BASE_URL without a trailing slash, e.g. `https://auth.example.com/auth`. */
  readonly issuer: string;
  /** The issuer's path ('' at the host root, `/auth` when the service is mounted below a path). */
  readonly basePath: string;
  readonly port: number;
  /**
   * BASE_URL unset and PORT=0: the issuer is to name the port the listener is given, which only
   * listening tells (src/main.ts, then listeningOn()); until then it says port 0.
   */
  readonly issuerFollowsListener: boolean;
  /** Listen address; undefined listens on every interface. */
  readonly host: string | undefined;
  /** Processes serving requests (node:cluster) over the one shared store; 1 serves from this process. */
  readonly workers: number;
  /** Storage URL: `sqlite:<path>`, `memory:`, or Redis (`redis://`, `rediss://`, `redis+sentinel://`, `redis+cluster://`). */
  readonly store: string;
  /** What a write waits for before it is acknowledged (REDIS_WAIT_REPLICAS, REDIS_WAIT_TIMEOUT, SQLITE_SYNCHRONOUS). */
  readonly durability: StoreDurability;
  /**
   * How many reverse proxies stand in front (0: none). Their X-Forwarded-For (the client address,
   * counted from the right) and X-Forwarded-Proto are believed; the host never is (URLs come from
   * BASE_URL), except to send a browser asking for a page under another name to BASE_URL (src/http/page_host.ts).
   */
  readonly proxyHops: number;
  /** How the pages name the service (SERVICE_NAME, SERVICE_LOGO_URL, SERVICE_DOCUMENTATION_URL). */
  readonly service: ServiceIdentity;
  readonly logLevel: LogLevel;
  /** Prometheus metrics at `/metrics` (src/http/metrics/), and where they are served; undefined with METRICS=off. */
  readonly metrics: MetricsSettings | undefined;
  readonly registration: RegistrationMode;
  /**
   * Seconds a registration access token (RFC 7592) lives; each update issues a new one with this
   * lifetime. Undefined: it lives as long as its client (REGISTRATION_ACCESS_TOKEN_TTL).
   */
  readonly registrationAccessTokenTtl: number | undefined;
  /**
   * Seconds a client that registered itself may go without obtaining a token before it is removed
   * (src/clients/unused_clients.ts); undefined with UNUSED_CLIENT_TTL=off.
   */
  readonly unusedClientTtl: number | undefined;
  /** Seconds a grant's refresh tokens last in all, through every rotation (src/engine/refresh_tokens.ts). */
  readonly refreshTokenAbsoluteLifetime: number;
  /** Which authorization requests must use PKCE (src/engine/pkce.ts). */
  readonly pkceRequired: PkcePolicy;
  /** Every authorization request must be pushed first (PAR_REQUIRED). */
  readonly parRequired: boolean;
  /** The data API and /mcp accept DPoP-bound access tokens only (DPOP_REQUIRED). */
  readonly dpopRequired: boolean;
  /** Every DPoP proof must carry a server nonce (DPOP_NONCE_REQUIRED). */
  readonly dpopNonceRequired: boolean;
  /** Every client that obtains tokens is a FAPI 2.0 client (FAPI; src/clients/fapi.ts), not only those an operator made one. */
  readonly fapi: boolean;
  /** Client ID Metadata Documents (src/clients/metadata_documents.ts); undefined with CIMD=off. */
  readonly cimd: MetadataDocumentSettings | undefined;
  /** Origins of pages that may call `/mcp` besides the issuer's own (MCP_ALLOWED_ORIGINS). */
  readonly mcpAllowedOrigins: readonly string[];
  /** Rate limits (src/rate_limits/); undefined with RATE_LIMITS=off. */
  readonly rateLimits: RateLimits | undefined;
  /** Private JWKS file supplied by the operator instead of generated keys. */
  readonly jwksFile: string | undefined;
  /**
   * The key-encryption key that seals the stored signing and cookie keys. Undefined: neither
   * variable is set and the store is not the embedded one (`memory:` makes one per run, Redis
   * refuses to start).
   */
  readonly keyEncryptionKey: KeyEncryptionKeySource | undefined;
  /** Earlier key-encryption keys, still accepted for values sealed before a rotation (KEY_ENCRYPTION_KEY_PREVIOUS). */
  readonly previousKeyEncryptionKeys: readonly string[];
  /** Signing-key rotation (src/keys/rotation.ts). */
  readonly keyRotation: KeyRotationPolicy;
}

export type KeyEncryptionKeySource =
  /** KEY_ENCRYPTION_KEY */
  | { readonly value: string }
  /** KEY_ENCRYPTION_KEY_FILE */
  | { readonly file: string }
  /**
   * Neither, with the embedded store: the file `created` under the user's configuration directory
   * (XDG_CONFIG_HOME) at first start, outside the data directory; or, when an earlier version made
   * one there, the file `besideDatabase` (`oauth.sqlite` -> `oauth.kek`).
   */
  | { readonly created: string; readonly besideDatabase: string };

export interface MetadataDocumentSettings {
  /** CIMD_TRUSTED_HOSTS: `host:port` that may be fetched on private or loopback addresses. */
  readonly trustedHosts: readonly string[];
  /** CIMD_ALLOWED_DOMAINS: the domains whose URLs may act as clients; undefined: any. */
  readonly allowedDomains: readonly string[] | undefined;
}

/**
 * `local` (METRICS=local, the default): on a listener of their own at `host`:`port`
 * (METRICS_HOST, METRICS_PORT), never on the service's port. `public`: on the service's port.
 * `token` (METRICS_TOKEN): the bearer token a scrape must present, either way; undefined: anyone
 * who reaches the metrics may scrape.
 */
export type MetricsSettings =
  | { readonly where: 'local'; readonly host: string; readonly port: number; readonly token: string | undefined }
  | { readonly where: 'public'; readonly token: string | undefined };

export interface KeyRotationPolicy {
  /** KEY_PREPUBLISH: seconds a new signing key is published before it signs. */
  readonly prepublishSeconds: number;
  /** KEY_RETENTION: seconds a replaced key stays published and verifying after it stops signing. */
  readonly retentionSeconds: number;
  /** KEY_ROTATION_DAYS, in seconds: how long each key signs before the service rotates on its own; undefined: only `keys rotate` does. */
  readonly everySeconds: number | undefined;
}

/** So many requests (`points`) per `duration` seconds, from `N/duration` (`100/1h`). */
export interface Rate {
  readonly points: number;
  readonly duration: number;
}

export interface RateLimits {
  /** RATE_LIMIT_REGISTRATION: client registrations per client address. */
  readonly registration: Rate;
  /** RATE_LIMIT_TOKEN_CLIENT: tokens issued per client_id (refused requests do not count). */
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
  /** RATE_LIMIT_CREDENTIAL_ADDRESS: failed bearer credentials and failed client authentication at introspection, per client address. */
  readonly failedCredentialsPerAddress: Rate;
  /** RATE_LIMIT_INTERACTION_ADDRESS: authorization requests per client address that start an interaction (a sign-in or consent page). */
  readonly interactionsPerAddress: Rate;
  /** RATE_LIMIT_IPV6_PREFIX: the IPv6 prefix length every per-address limit counts as one address. */
  readonly ipv6Prefix: number;
}
