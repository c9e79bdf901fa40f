import { domainToUnicode } from 'node:url';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';

/**
 * The one storage interface every backend (sqlite, memory, redis) implements.
 * Everything the service keeps goes through it: the OAuth engine's models,
 * accounts, and the service's own key material.
 */

/** What the OAuth engine hands a model store: a JSON object, opaque to storage. */
export type ModelPayload = Record<string, unknown>;

/**
 * Storage for one oidc-provider model (Session, Grant, AccessToken, Client...).
 * The shape follows oidc-provider's adapter contract; the `consume` result is the
 * one addition, so the engine-facing layer can make redemption atomic.
 */
export interface ModelStore {
  /**
   * Insert or replace. `expiresIn` seconds, a fraction allowed (the record then expires at the
   * second they reach: `secondsUntil(at)` stores it to expire at `at`); undefined means the record
   * never expires (clients).
   */
  upsert(id: string, payload: ModelPayload, expiresIn: number | undefined): Promise<void>;
  find(id: string): Promise<ModelPayload | undefined>;
  findByUid(uid: string): Promise<ModelPayload | undefined>;
  findByUserCode(userCode: string): Promise<ModelPayload | undefined>;
  /**
   * Marks the record consumed under a new claim, which it resolves for exactly one caller;
   * undefined when it is gone or already consumed. With `takeOverBefore` (epoch seconds), a
   * consumption made at or before it counts as abandoned (a redemption whose request can no longer
   * complete it) and is taken over under the new claim, by exactly one caller. When it rejects (an
   * outage), the record is not left consumed by this call as far as the store can tell: the caller
   * answers an outage, and the client's retry must find the code or refresh token still redeemable.
   */
  consume(id: string, takeOverBefore?: number): Promise<string | undefined>;
  /**
   * Gives back a consumption made under `claim` for a redemption the caller then did not answer:
   * the record is redeemable again. Nothing when another claim has taken it over. Not waited for
   * by replicas (it is best effort, and undoes on the primary what the replicas may not hold either).
   */
  release(id: string, claim: string): Promise<void>;
  /**
   * Deletes a record still consumed under `claim`: the redemption it stood for is complete
   * (`completed`). In its place a mark of the claim stays for COMPLETION_MARK_SECONDS, found by
   * nothing else (the record is gone for find, consume and every other method), so that the same
   * completion tried again, or its answer delayed, is still `completed`: a caller whose answer was
   * lost learns it was its own. Deletes nothing when the record is not consumed under that claim
   * (`unclaimed`: another caller took it over, gave it back or completed it) or is `gone`.
   */
  complete(id: string, claim: string): Promise<Completion>;
  /**
   * What `complete(id, claim)` would find, read without writing (a primary refusing writes still
   * answers): `pending` while the record is consumed under `claim` and not completed.
   */
  completionOf(id: string, claim: string): Promise<Completion | 'pending'>;
  /**
   * Deletes the mark `complete` left for `claim`, once its caller knows the outcome: marks then
   * never add up, however often a record is redeemed. Best effort, and not waited for by replicas:
   * a mark left behind expires.
   */
  forgetCompletion(id: string, claim: string): Promise<void>;
  /**
   * Counts one use of the record, atomically, unless it already has `limit`: resolves how many uses
   * it has with this one (1 to `limit`), or 0 when it is used up or gone. An upsert starts the count
   * again. However many callers race, at most `limit` of them get a number.
   */
  countUse(id: string, limit: number): Promise<number>;
  /**
   * Stores a record found by its id alone (no grant, uid, user code or listing: a single-use
   * marker such as a client assertion's `jti`) unless a live one has this id. Resolves true for
   * exactly one of any number of concurrent callers; an expired record counts as absent.
   */
  insertNew(id: string, payload: ModelPayload, expiresIn: number): Promise<boolean>;
  destroy(id: string): Promise<void>;
  /** Deletes a record whose write was not answered; like release, best effort and not waited for by replicas. */
  discard(id: string): Promise<void>;
  revokeByGrantId(grantId: string): Promise<void>;
  /** Every live record of this model, oldest first (used by the admin CLI for clients). */
  list(): Promise<Array<{ id: string; payload: ModelPayload }>>;
  /**
   * The live records of this model whose LISTED_BY field equals `value` (a user's grants, a
   * workspace's clients), in no particular order; none for a model LISTED_BY does not name.
   */
  listBy(value: string): Promise<Array<{ id: string; payload: ModelPayload }>>;
}

/** What completing a consumption found (ModelStore.complete). */
export type Completion = 'completed' | 'unclaimed' | 'gone';

/**
 * How long a completion's mark stays (ModelStore.complete): far longer than a redemption keeps
 * trying to complete or an answer can be delayed, short enough that marks never add up.
 */
export const COMPLETION_MARK_SECONDS = 300;

/**
 * The payload field each model's records can be listed by (ModelStore.listBy): a grant by its user
 * (the settings area's connected applications), a client by the workspace it is bound to, a
 * sign-in session by its user and a grant's workspace binding and an initial access token by their
 * workspace (what ending a user's access or deleting a workspace must find), an invitation by its
 * workspace (the members page lists those pending, src/settings/invitations.ts). Every backend indexes
 * these models, and only these: an index entry is a write, and each of these is stored at sign-in,
 * consent, registration, by an admin or by the operator, never per token. An entry lives and goes
 * with its record.
 */
export const LISTED_BY: Readonly<Record<string, string>> = {
  Grant: 'accountId',
  Client: 'workspace_id',
  RegistrationAccessToken: 'clientId',
  Session: 'accountId',
  GrantWorkspace: 'workspaceId',
  InitialAccessToken: 'workspaceId',
  // Listed since it was first stored: no store holds one it has not indexed, so LISTED_BY_VERSION stays.
  Invitation: 'workspaceId',
};

/**
 * The version of LISTED_BY a store's records are indexed for: 0 before records were listed, or
 * before sessions, grant workspaces and initial access tokens were. A store of an older version is
 * indexed once, by the first version that reads it (listed_records.ts of each backend).
 */
export const LISTED_BY_VERSION = 1;

/** The value a record is listed by (LISTED_BY), if its model is listed and the record has one. */
export function listedValue(model: string, payload: ModelPayload): string | undefined {
  const field = LISTED_BY[model];
  const value = field === undefined ? undefined : payload[field];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * An email as the service stores and looks it up: trimmed, in Unicode's composed form (NFC), its
 * domain in Unicode. An `é` is one character or an `e` followed by a combining accent depending on
 * the keyboard that typed it, and a domain may come in punycode (`xn--`, as a browser's email
 * field sends it); each reads the same, so they must be one address: never two users who read
 * alike, nor a sign-in refused (or a sign-in lock counted twice) for how the address was typed.
 */
export function normalEmail(email: string): string {
  const composed = email.trim().normalize('NFC');
  const at = composed.lastIndexOf('@');
  const domain = at < 0 ? '' : composed.slice(at + 1);
  if (!/(?:^|\.)xn--/i.test(domain)) return composed;
  const unicode = domainToUnicode(domain);
  return unicode ? `${composed.slice(0, at)}@${unicode.normalize('NFC')}` : composed;
}

/**
 * How every store tells two emails apart (once normalEmail has composed them): with their ASCII
 * letters lower-cased, as SQLite's NOCASE compares them, and nothing else folded. Whatever counts
 * per account (the sign-in lock) keys it the same way, so that two accounts are never one lock,
 * and one account never two.
 */
export function foldEmail(email: string): string {
  return email.replace(/[A-Z]/g, (letter) => letter.toLowerCase());
}

export type Role = 'admin' | 'member' | 'viewer';
export const ROLES: readonly Role[] = ['admin', 'member', 'viewer'];

export interface Workspace {
  id: string;
  name: string;
  createdAt: number;
}

export interface User {
  id: string;
  /** Stored composed (normalEmail); lookups ignore the case of ASCII letters (foldEmail). */
  email: string;
  name: string;
  givenName?: string;
  familyName?: string;
  /** PHC-formatted argon2id hash; never leaves the accounts module. */
  passwordHash: string;
  createdAt: number;
}

export interface Membership {
  userId: string;
  workspaceId: string;
  role: Role;
}

/**
 * Workspaces, users and memberships.
 *
 * One rule holds on every backend, checked and applied in one atomic step so that concurrent
 * changes cannot both pass it (two admins demoting each other): a workspace that has an admin
 * keeps one. A change that would take the last one away (demoting or removing them, deleting the
 * user) is refused with LastAdminError and changes nothing.
 */
export interface AccountStore {
  createWorkspace(workspace: Workspace): Promise<void>;
  getWorkspace(id: string): Promise<Workspace | undefined>;
  listWorkspaces(): Promise<Workspace[]>;
  /** Deletes the workspace and every membership of it; false when there was no such workspace. */
  deleteWorkspace(id: string): Promise<boolean>;
  /** Rejects with DuplicateError when the email is taken (case-insensitively). */
  createUser(user: User): Promise<void>;
  getUser(id: string): Promise<User | undefined>;
  findUserByEmail(email: string): Promise<User | undefined>;
  countUsers(): Promise<number>;
  /** Every user, oldest first (by createdAt, then id). */
  listUsers(): Promise<User[]>;
  /** Replaces the user's password hash; false when there is no such user. */
  setPasswordHash(userId: string, passwordHash: string): Promise<boolean>;
  /**
   * Deletes the user and their memberships; false when there was no such user. LastAdminError
   * (nothing deleted) when they are the last admin of a workspace.
   */
  deleteUser(userId: string): Promise<boolean>;
  /** Creates or changes the user's role in the workspace; LastAdminError when it demotes its last admin. */
  putMembership(membership: Membership): Promise<void>;
  /** Ends the user's membership; false when there was none. LastAdminError when they are its last admin. */
  removeMembership(userId: string, workspaceId: string): Promise<boolean>;
  listMemberships(userId: string): Promise<Membership[]>;
  /** The workspace's memberships, in no particular order. */
  listMembers(workspaceId: string): Promise<Membership[]>;
  /** The user's membership of one workspace (one lookup: every token issuance reads it). */
  getMembership(userId: string, workspaceId: string): Promise<Membership | undefined>;
}

/** Small named values shared by every instance (signing keys, cookie keys). */
export interface SettingStore {
  get(name: string): Promise<string | undefined>;
  /**
   * Stores `value` unless the name is already set, and returns what is stored.
   * The first writer wins, so instances starting together agree on one value.
   */
  setIfAbsent(name: string, value: string): Promise<string>;
  /** Replaces the value (re-sealing a key under a new key-encryption key). */
  put(name: string, value: string): Promise<void>;
  /**
   * Replaces the value only if it still is `expected` (what the caller read), atomically; false
   * when another writer changed it first (or it is not set). Of writers racing from one read, one wins.
   */
  compareAndSet(name: string, expected: string, value: string): Promise<boolean>;
}

/**
 * One revocation of JWT access tokens, which are never stored: it refuses the tokens that match
 * `key` and were issued (`iat`) before `issuedBefore`, and is forgotten at `expiresAt`, when no
 * token it could match is still alive. Times are in seconds since the epoch.
 */
export interface RevocationEntry {
  /** `token:<jti>`, `grant:<grant ref>`, `client:<client id>` or `resource:<resource URI>`. */
  key: string;
  /** For `token:` entries, the grant or client the token belongs to (`grant:<ref>` or `client:<id>`), so floods can be counted. */
  owner?: string;
  issuedBefore: number;
  expiresAt: number;
}

/**
 * The revocation list every instance mirrors in process. Entries arrive in the order they were
 * written; each write (also of a key already present) gets a new, higher position.
 */
export interface RevocationStore {
  /** Adds an entry, or widens the one under the same key (the later `issuedBefore` and `expiresAt` win). */
  add(entry: RevocationEntry): Promise<void>;
  /** Live entries written after position `cursor` (0: all of them), oldest first, and the position to ask from next. */
  changesSince(cursor: number): Promise<{ entries: RevocationEntry[]; cursor: number }>;
}

/**
 * One record of the data API (a company, a person), as stored. The store knows nothing of the
 * object types' fields: `values` is what the resource layer validated, absent fields are null.
 */
export interface DataRecord {
  id: string;
  /** Where the record sits in its list: assigned at creation, increasing, never reused. */
  position: number;
  /** ISO 8601 times. */
  createdAt: string;
  updatedAt: string;
  values: Record<string, unknown>;
}

export interface RecordPage {
  records: DataRecord[];
  /** Records of this object in the workspace, in every page. */
  total: number;
  /** More records come after the last one of this page. */
  hasMore: boolean;
}

/**
 * A create made under an idempotency key (an `Idempotency-Key` header): kept for `keptFor`
 * seconds in the same atomic write as the record, so a retry of a create whose answer was lost
 * (a 503 after the write was made) finds it rather than making the record twice. Holds no value
 * of the record: `key` is a keyed digest of the key and the credential that sent it, and
 * `fingerprint` one of the request, under a key the store does not hold, so that no copy of the
 * store can be checked against a guess of what a deleted record held.
 */
export interface KeyedCreate {
  key: string;
  fingerprint: string;
  keptFor: number;
}

/** What an earlier create under the same key made: its request's fingerprint, and the record's object and id. */
export interface EarlierCreate {
  fingerprint: string;
  object: string;
  id: string;
}

/** The data API's records, each in one workspace and one object type (`companies`, `people`). Kept without a lifetime; the key of a keyed create (createOnce) for its time. */
export interface RecordStore {
  /** Inserts a new record and gives it its position; rejects with DuplicateError when the id is taken. */
  create(workspaceId: string, object: string, record: Omit<DataRecord, 'position'>): Promise<DataRecord>;
  /**
   * As create, unless a create under the same key in this workspace is still kept: then nothing is
   * written and what that one made is given back. The key is kept with the record in one write.
   */
  createOnce(workspaceId: string, object: string, record: Omit<DataRecord, 'position'>, keyed: KeyedCreate): Promise<{ created: DataRecord } | { earlier: EarlierCreate }>;
  /** What a create under `key` (a KeyedCreate's) made in this workspace, while it is kept. */
  earlierCreate(workspaceId: string, key: string): Promise<EarlierCreate | undefined>;
  get(workspaceId: string, object: string, id: string): Promise<DataRecord | undefined>;
  /** Which of `ids` name a record of this object in this workspace. */
  existing(workspaceId: string, object: string, ids: string[]): Promise<Set<string>>;
  /** Up to `limit` records positioned after `after` (0: from the first), in position order. */
  list(workspaceId: string, object: string, after: number, limit: number): Promise<RecordPage>;
  /**
   * Merges `changes` into the record in one atomic step (a null value clears the field), so two
   * concurrent updates of different fields both stay. Undefined when there is no such record.
   */
  update(workspaceId: string, object: string, id: string, changes: Record<string, unknown>, updatedAt: string): Promise<DataRecord | undefined>;
  /** False when there was no such record. */
  delete(workspaceId: string, object: string, id: string): Promise<boolean>;
  /**
   * Deletes every record of this object in the workspace (a deleted workspace's), and the keys of
   * the creates that made them; resolves how many records there were.
   */
  deleteAll(workspaceId: string, object: string): Promise<number>;
}

/** For every backend: absent and null mean the same, so only set fields are stored, as an update's merge leaves them. */
export function withoutNulls(values: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== null && value !== undefined));
}

/** A workspace's API key as stored: never the key itself, only its digest. Times in seconds since the epoch. */
export interface ApiKeyRecord {
  id: string;
  workspaceId: string;
  name: string;
  /** Digest of the whole key (src/shared/digest.ts), by which a presented key is found. */
  digest: string;
  /** The key's first characters, shown in lists so a person can tell keys apart. */
  hint: string;
  createdAt: number;
  /** Undefined: never expires. */
  expiresAt?: number;
  lastUsedAt?: number;
}

/** API keys. An expired key is gone: no read returns it. */
export interface ApiKeyStore {
  /** Rejects with DuplicateError when the id or digest is taken. */
  create(key: ApiKeyRecord): Promise<void>;
  findByDigest(digest: string): Promise<ApiKeyRecord | undefined>;
  get(id: string): Promise<ApiKeyRecord | undefined>;
  /** The workspace's live keys, oldest first. */
  list(workspaceId: string): Promise<ApiKeyRecord[]>;
  /** False when there was no such key. */
  delete(id: string): Promise<boolean>;
  /** Records a use; does nothing for a key that is gone. */
  touch(id: string, lastUsedAt: number): Promise<void>;
}

/**
 * One rate limiter's rule: each key may spend `points` within `duration` seconds, a fixed window
 * that starts with the key's first point.
 */
export interface RateLimitRule {
  /** Names the limiter: its keys never meet another limiter's. Letters, digits, `-` and `_`. */
  name: string;
  points: number;
  /** Seconds. */
  duration: number;
}

export interface Store {
  readonly kind: 'sqlite' | 'memory' | 'redis';
  model(name: string): ModelStore;
  readonly accounts: AccountStore;
  readonly settings: SettingStore;
  readonly revocations: RevocationStore;
  readonly records: RecordStore;
  readonly apiKeys: ApiKeyStore;
  /**
   * The rate limiter (rate-limiter-flexible) for a rule: one per name, the same one when asked
   * again (another rule under a known name is refused). On Redis its counts are shared by every
   * process on the same Redis, and kept in this process while Redis cannot be reached, so a limiter
   * never fails a request; on SQLite and memory they are this process's own (with WORKERS above 1,
   * each worker counts alone).
   */
  rateLimiter(rule: RateLimitRule): RateLimiterAbstract;
  /**
   * Resolves when the backend answers (Redis: and takes writes); rejects with
   * BackendUnavailableError when it does not, its `refusal` saying why when the backend answered.
   */
  ping(): Promise<void>;
  /**
   * Resolves once every write made so far is durable; rejects with BackendUnavailableError when
   * it could not be made so (and then none of the writes pending with it is stored). The host
   * awaits it before answering a request, so a backend may confirm writes in groups.
   */
  committed(): Promise<void>;
  close(): Promise<void>;
}

/**
 * How long a write takes to be kept, beyond what each backend always does (SQLite commits before
 * a response; Redis answers once the primary has applied it).
 */
export interface StoreDurability {
  /**
   * Redis: acknowledge a write only once this many replicas hold it (WAIT after the write, on the
   * connection and node that made it), so a failover to one of them cannot lose it; undefined: off
   * (replication stays asynchronous). Ignored by the other backends (configuration refuses it).
   */
  readonly replicaWait: ReplicaWait | undefined;
  /**
   * SQLite's `synchronous` in WAL mode. `normal`: a commit survives the process crashing, and may
   * be lost with the last few others when the machine loses power or the OS crashes; `full`: it
   * survives that too, at the cost of an fsync per commit (per group of commits: see the connection).
   */
  readonly sqliteSynchronous: SqliteSynchronous;
}

export interface ReplicaWait {
  /** Replicas that must hold a write before it is acknowledged (at least 1). */
  readonly replicas: number;
  /** How long to wait for them (ms) before the write is refused as BackendUnavailableError. */
  readonly timeoutMs: number;
}

export type SqliteSynchronous = 'normal' | 'full';
export const SQLITE_SYNCHRONOUS: readonly SqliteSynchronous[] = ['normal', 'full'];

export class DuplicateError extends Error {
  override name = 'DuplicateError';
}

/** A change refused because it would leave the workspace without an admin (AccountStore). */
export class LastAdminError extends Error {
  override name = 'LastAdminError';
  readonly workspaceId: string;

  constructor(workspaceId: string) {
    super(`the change would leave workspace ${workspaceId} without an admin`);
    this.workspaceId = workspaceId;
  }
}

/** The backend cannot be reached; the HTTP layer answers 503. */
export class BackendUnavailableError extends Error {
  override name = 'BackendUnavailableError';
  /** The backend's own word for why it refused, when it answered (Redis: READONLY, OOM, NOREPLICAS...). */
  readonly refusal: string | undefined;

  constructor(message: string, options?: ErrorOptions & { refusal?: string | undefined }) {
    super(message, options);
    this.refusal = options?.refusal;
  }
}

/**
 * The store a storage URL names cannot be opened at all (a SQLite file that cannot be created,
 * read or is not a database): waiting would not help, the URL or the file must change.
 */
export class StoreOpenError extends Error {
  override name = 'StoreOpenError';
}
