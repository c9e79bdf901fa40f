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
  /** Insert or replace. `expiresIn` seconds; undefined means the record never expires (clients). */
  upsert(id: string, payload: ModelPayload, expiresIn: number | undefined): Promise<void>;
  find(id: string): Promise<ModelPayload | undefined>;
  findByUid(uid: string): Promise<ModelPayload | undefined>;
  findByUserCode(userCode: string): Promise<ModelPayload | undefined>;
  /** Marks the record consumed. Resolves true for exactly one caller; false when it was already consumed or is gone. */
  consume(id: string): Promise<boolean>;
  destroy(id: string): Promise<void>;
  revokeByGrantId(grantId: string): Promise<void>;
  /** Every live record of this model, oldest first (used by the admin CLI for clients). */
  list(): Promise<Array<{ id: string; payload: ModelPayload }>>;
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
  /** Stored as given; lookups are case-insensitive. */
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

export interface AccountStore {
  createWorkspace(workspace: Workspace): Promise<void>;
  getWorkspace(id: string): Promise<Workspace | undefined>;
  listWorkspaces(): Promise<Workspace[]>;
  /** Rejects with DuplicateError when the email is taken (case-insensitively). */
  createUser(user: User): Promise<void>;
  getUser(id: string): Promise<User | undefined>;
  findUserByEmail(email: string): Promise<User | undefined>;
  countUsers(): Promise<number>;
  /** Creates or changes the user's role in the workspace. */
  putMembership(membership: Membership): Promise<void>;
  listMemberships(userId: string): Promise<Membership[]>;
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
}

/**
 * One revocation of JWT access tokens, which are never stored: it refuses the tokens that match
 * `key` and were issued (`iat`) before `issuedBefore`, and is forgotten at `expiresAt`, when no
 * token it could match is still alive. Times are in seconds since the epoch.
 */
export interface RevocationEntry {
  /** `token:<jti>`, `grant:<grant ref>` or `client:<client id>`. */
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

export interface Store {
  readonly kind: 'sqlite' | 'memory' | 'redis';
  model(name: string): ModelStore;
  readonly accounts: AccountStore;
  readonly settings: SettingStore;
  readonly revocations: RevocationStore;
  /** Resolves when the backend answers; rejects with BackendUnavailableError when it does not. */
  ping(): Promise<void>;
  /**
   * Resolves once every write made so far is durable; rejects with BackendUnavailableError when
   * it could not be made so (and then none of the writes pending with it is stored). The host
   * awaits it before answering a request, so a backend may confirm writes in groups.
   */
  committed(): Promise<void>;
  close(): Promise<void>;
}

export class DuplicateError extends Error {
  override name = 'DuplicateError';
}

/** The backend cannot be reached; the HTTP layer answers 503. */
export class BackendUnavailableError extends Error {
  override name = 'BackendUnavailableError';
}
