import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';

import { sqliteFile } from '../adapters/index.ts';
import { StoreOpenError, type StoreDurability } from '../adapters/store.ts';
import { isRedisUrl } from '../adapters/redis/url.ts';
import { ConfigError } from './parsers.ts';
import { read, type Env } from './schema.ts';
import type { Config, KeyEncryptionKeySource, KeyRotationPolicy, MetricsSettings, RateLimits } from './types.ts';

/**
 * Service configuration: read from the environment once, at start, validated, then passed down.
 * A bad value stops the service with a message that names the variable. Each variable is read
 * through its entry in config/schema.ts; the rules between variables are here.
 */

export { ConfigError } from './parsers.ts';
export type { Config, KeyEncryptionKeySource, KeyRotationPolicy, LogLevel, MetadataDocumentSettings, MetricsSettings, PkcePolicy, Rate, RateLimits, RegistrationMode, ServiceIdentity } from './types.ts';

/**
 * What a configuration error says, after `configuration error: ` (a store that cannot be opened is
 * STORE's); undefined for an error that is none, a fault of the service's, whose stack is shown.
 */
export function configurationProblem(error: unknown): string | undefined {
  if (error instanceof StoreOpenError) return `STORE: ${error.message}`;
  return error instanceof ConfigError ? error.message : undefined;
}

/** The one line the service at start, and the admin CLI, say a configuration error in. */
export function configurationErrorLine(problem: string): string {
  return `configuration error: ${problem}`;
}

export function loadConfig(env: Env = process.env): Config {
  const port = read(env, 'PORT');
  const baseUrl = read(env, 'BASE_URL');
  const { issuer, basePath } = baseUrl ?? { issuer: defaultIssuer(port), basePath: '' };
  const store = read(env, 'STORE');
  return {
    issuer,
    basePath,
    port,
    issuerFollowsListener: baseUrl === undefined && port === 0,
    host: read(env, 'HOST'),
    workers: workers(env, store),
    store,
    durability: durability(env, store),
    proxyHops: read(env, 'TRUST_PROXY'),
    service: { name: read(env, 'SERVICE_NAME'), logoUrl: read(env, 'SERVICE_LOGO_URL'), documentationUrl: read(env, 'SERVICE_DOCUMENTATION_URL') },
    logLevel: read(env, 'LOG_LEVEL'),
    metrics: metrics(env, port),
    registration: read(env, 'REGISTRATION'),
    registrationAccessTokenTtl: read(env, 'REGISTRATION_ACCESS_TOKEN_TTL'),
    unusedClientTtl: read(env, 'UNUSED_CLIENT_TTL'),
    refreshTokenAbsoluteLifetime: read(env, 'REFRESH_TOKEN_ABSOLUTE_LIFETIME'),
    pkceRequired: read(env, 'PKCE_REQUIRED'),
    parRequired: read(env, 'PAR_REQUIRED'),
    dpopRequired: read(env, 'DPOP_REQUIRED'),
    dpopNonceRequired: read(env, 'DPOP_NONCE_REQUIRED'),
    fapi: read(env, 'FAPI'),
    cimd: read(env, 'CIMD') ? { trustedHosts: read(env, 'CIMD_TRUSTED_HOSTS') ?? [], allowedDomains: read(env, 'CIMD_ALLOWED_DOMAINS') } : undefined,
    mcpAllowedOrigins: read(env, 'MCP_ALLOWED_ORIGINS') ?? [],
    rateLimits: rateLimits(env),
    jwksFile: read(env, 'JWKS_FILE'),
    keyEncryptionKey: keyEncryptionKey(env, store),
    previousKeyEncryptionKeys: read(env, 'KEY_ENCRYPTION_KEY_PREVIOUS') ?? [],
    keyRotation: keyRotation(env),
  };
}

/**
 * The configuration once the listener has its port. With BASE_URL unset and PORT=0 (a free port,
 * picked at listen), the default issuer, `http://localhost:$PORT`, names the port picked, so
 * discovery and every URL the service writes reach it.
 */
export function listeningOn(config: Config, port: number): Config {
  if (!config.issuerFollowsListener) return config;
  return { ...config, port, issuer: defaultIssuer(port), issuerFollowsListener: false };
}

/** The issuer with BASE_URL unset. */
function defaultIssuer(port: number): string {
  return `http://localhost:${port}`;
}

/** Workers serve one store: `memory:` is each process's own, so they would share no client, key or token. */
function workers(env: Env, store: string): number {
  const count = read(env, 'WORKERS');
  if (count > 1 && store === 'memory:') {
    throw new ConfigError(`WORKERS (${count}) runs processes over one store, and memory: is each process's own: they would share no client, key or token (use a sqlite: file or Redis, or WORKERS=1)`);
  }
  return count;
}

/** Each backend's own setting is refused with the other backend, where it would silently do nothing. */
function durability(env: Env, store: string): StoreDurability {
  const replicas = read(env, 'REDIS_WAIT_REPLICAS');
  const timeoutMs = read(env, 'REDIS_WAIT_TIMEOUT');
  const sqliteSynchronous = read(env, 'SQLITE_SYNCHRONOUS');
  if (replicas > 0 && !isRedisUrl(store)) {
    throw new ConfigError('REDIS_WAIT_REPLICAS waits for Redis replicas, and STORE is not a Redis URL (on SQLite, SQLITE_SYNCHRONOUS=full makes commits survive a power loss)');
  }
  if (sqliteSynchronous !== 'normal' && !sqliteFile(store)) {
    throw new ConfigError('SQLITE_SYNCHRONOUS applies to a sqlite: STORE (on Redis, REDIS_WAIT_REPLICAS makes writes survive a failover)');
  }
  return { replicaWait: replicas > 0 ? { replicas, timeoutMs } : undefined, sqliteSynchronous };
}

/** Every METRICS_* is checked, whatever METRICS says, so a typo is found before it matters. */
function metrics(env: Env, port: number): MetricsSettings | undefined {
  const where = read(env, 'METRICS');
  const host = read(env, 'METRICS_HOST');
  const metricsPort = read(env, 'METRICS_PORT');
  const token = read(env, 'METRICS_TOKEN');
  if (where === 'off') return undefined;
  if (where === 'public') return { where, token };
  if (metricsPort !== 0 && metricsPort === port) {
    throw new ConfigError(`METRICS_PORT (${metricsPort}) must not be PORT: the metrics have a listener of their own (METRICS=public serves them on PORT instead)`);
  }
  return { where, host, port: metricsPort, token };
}

/** Every RATE_LIMIT_* is checked, also with RATE_LIMITS=off, so a typo is found before the limits are turned on. */
function rateLimits(env: Env): RateLimits | undefined {
  const limits: RateLimits = {
    registration: read(env, 'RATE_LIMIT_REGISTRATION'),
    tokenPerClient: read(env, 'RATE_LIMIT_TOKEN_CLIENT'),
    tokenPerAddress: read(env, 'RATE_LIMIT_TOKEN_ADDRESS'),
    loginPerAddress: read(env, 'RATE_LIMIT_LOGIN_ADDRESS'),
    loginFailuresBeforeLock: read(env, 'RATE_LIMIT_LOGIN_ACCOUNT'),
    loginLock: read(env, 'RATE_LIMIT_LOGIN_LOCK'),
    loginLockMax: read(env, 'RATE_LIMIT_LOGIN_LOCK_MAX'),
    dataApi: read(env, 'RATE_LIMIT_DATA_API'),
    failedCredentialsPerAddress: read(env, 'RATE_LIMIT_CREDENTIAL_ADDRESS'),
    interactionsPerAddress: read(env, 'RATE_LIMIT_INTERACTION_ADDRESS'),
    ipv6Prefix: read(env, 'RATE_LIMIT_IPV6_PREFIX'),
  };
  if (limits.loginLockMax < limits.loginLock) {
    throw new ConfigError(`RATE_LIMIT_LOGIN_LOCK_MAX (${limits.loginLockMax}s) must not be shorter than RATE_LIMIT_LOGIN_LOCK (${limits.loginLock}s)`);
  }
  return read(env, 'RATE_LIMITS') ? limits : undefined;
}

/** The directory under the user's configuration directory where the embedded store's key-encryption key is made. */
const CONFIG_DIRECTORY = 'workspace-oauth-server';

function keyEncryptionKey(env: Env, store: string): KeyEncryptionKeySource | undefined {
  const file = read(env, 'KEY_ENCRYPTION_KEY_FILE');
  const configHome = read(env, 'XDG_CONFIG_HOME');
  if (file && env.KEY_ENCRYPTION_KEY) throw new ConfigError('KEY_ENCRYPTION_KEY and KEY_ENCRYPTION_KEY_FILE are both set: set one of them');
  if (file) return { file };
  const value = read(env, 'KEY_ENCRYPTION_KEY');
  if (value !== undefined) return { value };
  const database = sqliteFile(store);
  if (!database) return undefined;
  // Outside the data directory, so that a copy of it (a backup, a stolen disk image of it) opens nothing.
  return {
    created: join(configHome ?? join(homeDirectory(), '.config'), CONFIG_DIRECTORY, 'key-encryption.key'),
    besideDatabase: `${database.replace(/\.[^./]*$/, '')}.kek`,
  };
}

function homeDirectory(): string {
  let home = '';
  try {
    home = homedir();
  } catch {
    // No home directory for this user: said below.
  }
  if (!isAbsolute(home)) {
    throw new ConfigError('XDG_CONFIG_HOME must be set (there is no home directory to keep the key-encryption key under), or set KEY_ENCRYPTION_KEY or KEY_ENCRYPTION_KEY_FILE');
  }
  return home;
}

function keyRotation(env: Env): KeyRotationPolicy {
  const prepublishSeconds = read(env, 'KEY_PREPUBLISH');
  const retentionSeconds = read(env, 'KEY_RETENTION');
  const everySeconds = read(env, 'KEY_ROTATION_DAYS');
  if (everySeconds === undefined) return { prepublishSeconds, retentionSeconds, everySeconds };
  if (env.JWKS_FILE) throw new ConfigError('KEY_ROTATION_DAYS rotates the keys the service generates; the keys of JWKS_FILE are rotated by changing the file');
  if (everySeconds <= prepublishSeconds) throw new ConfigError(`KEY_ROTATION_DAYS (${everySeconds} s) must be longer than KEY_PREPUBLISH (${prepublishSeconds} s)`);
  return { prepublishSeconds, retentionSeconds, everySeconds };
}
