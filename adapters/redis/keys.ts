import { foldEmail } from '../store.ts';

/**
 * Where the Redis store keeps what, every key under one prefix (default `oauth:`) so the service
 * can share a Redis with others.
 *
 * Engine records and their lookup entries carry no hash tag: each is found by a different value
 * (id, uid, user code, grant id), so no step writes two of them atomically. They are written as
 * separate single-key commands in an order that makes a partial write harmless: lookup entries
 * first, the record last (an entry whose record is missing or no longer matches is skipped), and
 * on removal the record first. Accounts and the revocation list are small and need multi-key
 * atomic steps (one email per user, positions in write order), so each lives under one hash tag,
 * which keeps all of its keys on one cluster node; so do API keys (one id per digest). Data records
 * have a hash tag per workspace: a step only ever touches one workspace's keys.
 */
export class RedisKeys {
  readonly #prefix: string;

  constructor(prefix: string) {
    // A brace in the prefix would become the hash tag of every key and put them all in one slot.
    if (/[{}]/.test(prefix)) throw new TypeError(`the Redis key prefix must not contain braces, got "${prefix}"`);
    this.#prefix = prefix;
  }

  /** Every key of this store starts with it. */
  get prefix(): string {
    return this.#prefix;
  }

  /** Hash: p = payload JSON, c = consumed at, g = grant id, u = uses counted. TTL: the record's lifetime; none for records kept until destroyed (clients). */
  record(model: string, id: string): string {
    return `${this.#prefix}m:${model}:${id}`;
  }

  /** String: record id. TTL: the record's. */
  uid(model: string, uid: string): string {
    return `${this.#prefix}uid:${model}:${uid}`;
  }

  /** String: record id. TTL: the record's. */
  userCode(model: string, userCode: string): string {
    return `${this.#prefix}ucode:${model}:${userCode}`;
  }

  /** Sorted set: record id scored by its expiry (ms). TTL: the furthest member expiry. */
  grant(model: string, grantId: string): string {
    return `${this.#prefix}grant:${model}:${grantId}`;
  }

  /**
   * Sorted set: ids of the model's records whose LISTED_BY field is `value` (a user's grants, a
   * workspace's clients), scored by the record's expiry (ms, or +inf), for listBy(). TTL: the
   * furthest member expiry; none while it lists a record kept without a lifetime.
   */
  listedBy(model: string, value: string): string {
    return `${this.#prefix}by:${model}:${value}`;
  }

  /** String: the LISTED_BY_VERSION the store's records are indexed for (listed_records.ts); missing before that was kept. No TTL. */
  listedByVersion(): string {
    return `${this.#prefix}listed_by_version`;
  }

  /**
   * Sorted set: ids of the records kept without a lifetime, and of every client (one on probation
   * has a lifetime until first used), scored by when first stored, for list(). No TTL.
   */
  list(model: string): string {
    return `${this.#prefix}list:${model}`;
  }

  /**
   * Sorted set: ids of the records in list() that have a lifetime (clients on probation), scored by
   * their expiry (ms), so those that expired leave list() too. TTL: the furthest member expiry.
   */
  listExpiring(model: string): string {
    return `${this.#prefix}list_expiring:${model}`;
  }

  /** String: workspace JSON. */
  workspace(id: string): string {
    return `${this.#prefix}{accounts}:workspace:${id}`;
  }

  /** Sorted set: workspace ids scored by createdAt (ties in id order, as Redis orders equal scores). */
  workspaces(): string {
    return `${this.#prefix}{accounts}:workspaces`;
  }

  /** String: user JSON. */
  user(id: string): string {
    return `${this.#prefix}{accounts}:user:${id}`;
  }

  /** String: the id of the user with this email (case-folded). */
  email(email: string): string {
    return `${this.#prefix}{accounts}:email:${foldEmail(email)}`;
  }

  /** Set: every user id (countUsers). */
  users(): string {
    return `${this.#prefix}{accounts}:users`;
  }

  /** Hash: workspace id -> role, one per user. */
  memberships(userId: string): string {
    return `${this.#prefix}{accounts}:memberships:${userId}`;
  }

  /** Hash: user id -> role, one per workspace: the same memberships as memberships(), by workspace, written in the same steps. */
  members(workspaceId: string): string {
    return `${this.#prefix}{accounts}:members:${workspaceId}`;
  }

  /** String, set once members() holds the memberships stored before it was kept (accounts.ts). */
  membersIndexed(): string {
    return `${this.#prefix}{accounts}:members-indexed`;
  }

  /**
   * Prefix of one rate limiter's keys: rate-limiter-flexible adds `:<key>` (a digest, see
   * src/rate_limits/). String: the points counted. TTL: the limiter's window, or a lock's
   * length. No hash tag: each command touches one key, so the counts spread over a cluster.
   */
  rateLimit(name: string): string {
    return `${this.#prefix}rl:${name}`;
  }

  /** String: written and deleted in one transaction by /readyz's check that Redis takes writes; never left behind. */
  readiness(): string {
    return `${this.#prefix}readiness`;
  }

  /** Hash: name -> value. No TTL. */
  settings(): string {
    return `${this.#prefix}settings`;
  }

  /**
   * Hash: one data record. `$p` = position, `$c` / `$u` = createdAt / updatedAt, and `v:<field>` =
   * that value's JSON, one field per value that is set (so an update merges field by field). No TTL.
   */
  dataRecord(workspaceId: string, object: string, id: string): string {
    return `${this.#dataTag(workspaceId)}:r:${object}:${id}`;
  }

  /** Sorted set: the ids of one object's records in the workspace, scored by position. No TTL; gone with the last record. */
  dataOrder(workspaceId: string, object: string): string {
    return `${this.#dataTag(workspaceId)}:order:${object}`;
  }

  /**
   * String: the last position given to one object's records in the workspace. No TTL while the
   * object has records; then it expires when the clock passes it (records.ts).
   */
  dataPosition(workspaceId: string, object: string): string {
    return `${this.#dataTag(workspaceId)}:position:${object}`;
  }

  /**
   * String: a create made under an idempotency key (`digest`: of the key and its credential), as
   * JSON `{f: fingerprint, o: object, id}`. TTL: as long as the key is kept (records.ts).
   */
  dataCreate(workspaceId: string, digest: string): string {
    return `${this.#dataTag(workspaceId)}:create:${digest}`;
  }

  /**
   * Sorted set: the dataCreate keys of one object's keyed creates in the workspace, scored by
   * when they expire, so that deleting every record of the object deletes them too. TTL: its
   * last member's.
   */
  dataCreates(workspaceId: string, object: string): string {
    return `${this.#dataTag(workspaceId)}:creates:${object}`;
  }

  /** One hash tag per workspace: its records spread over the cluster by workspace, and each step's keys share a node. */
  #dataTag(workspaceId: string): string {
    return `${this.#prefix}{data:${workspaceId}}`;
  }

  /**
   * Hash: one API key. w = workspace id, n = name, d = digest, h = hint, c = createdAt,
   * e = expiresAt (absent: never), l = lastUsedAt (absent: never used). TTL: until expiresAt; none without it.
   */
  apiKey(id: string): string {
    return `${this.#prefix}{apikeys}:key:${id}`;
  }

  /** String: the id of the API key with this digest. TTL: the key's. */
  apiKeyDigest(digest: string): string {
    return `${this.#prefix}{apikeys}:digest:${digest}`;
  }

  /**
   * Sorted set: the workspace's API key ids, in creation order (score: api_keys.ts
   * createApiKey). TTL: none once it has held a key that never expires, else at least the latest
   * member expiry; ids of expired keys are dropped when it is next listed.
   */
  apiKeys(workspaceId: string): string {
    return `${this.#prefix}{apikeys}:workspace:${workspaceId}`;
  }

  /** entries, log, expiry, position (see revocations.ts addRevocation). TTL: the furthest entry expiry. */
  revocations(): [entries: string, log: string, expiry: string, position: string] {
    const tag = `${this.#prefix}{revocations}`;
    return [`${tag}:entries`, `${tag}:log`, `${tag}:expiry`, `${tag}:position`];
  }
}
