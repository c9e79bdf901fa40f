import type {
  AccountStore, ApiKeyStore, ModelStore, RecordStore, RevocationStore, SettingStore, Store,
} from '../../../adapters/store.ts';
import type { Metrics, StoreOperationMetrics } from './metrics.ts';

/** Every method of a facet, each named once: a method added to the interface and not here fails the type check. */
type EveryMethod<T> = Record<keyof T, true>;

const MODEL_METHODS: EveryMethod<ModelStore> = {
  upsert: true, find: true, findByUid: true, findByUserCode: true, consume: true, release: true, complete: true, completionOf: true, forgetCompletion: true, insertNew: true, countUse: true,
  destroy: true, discard: true, revokeByGrantId: true, list: true, listBy: true,
};
const ACCOUNT_METHODS: EveryMethod<AccountStore> = {
  createWorkspace: true, getWorkspace: true, listWorkspaces: true, deleteWorkspace: true, createUser: true, getUser: true, findUserByEmail: true,
  countUsers: true, listUsers: true, setPasswordHash: true, deleteUser: true, putMembership: true, removeMembership: true,
  listMemberships: true, listMembers: true, getMembership: true,
};
const SETTING_METHODS: EveryMethod<SettingStore> = { get: true, setIfAbsent: true, put: true, compareAndSet: true };
const REVOCATION_METHODS: EveryMethod<RevocationStore> = { add: true, changesSince: true };
const RECORD_METHODS: EveryMethod<RecordStore> = { create: true, createOnce: true, earlierCreate: true, get: true, existing: true, list: true, update: true, delete: true, deleteAll: true };
const API_KEY_METHODS: EveryMethod<ApiKeyStore> = { create: true, findByDigest: true, get: true, list: true, delete: true, touch: true };

type AsyncMethod = (...args: unknown[]) => Promise<unknown>;

/**
 * The store with every operation timed and its failures counted (store_operation_* metrics),
 * wrapped once at start. Each operation's timer is made here, once: a call costs two clock reads
 * and an observation, nothing looked up.
 */
export function instrumentStore(store: Store, metrics: Metrics): Store {
  const models = new Map<string, ModelStore>();
  return {
    kind: store.kind,
    model(name) {
      let model = models.get(name);
      if (!model) {
        model = instrument(store.model(name), MODEL_METHODS, name, metrics);
        models.set(name, model);
      }
      return model;
    },
    accounts: instrument(store.accounts, ACCOUNT_METHODS, 'accounts', metrics),
    settings: instrument(store.settings, SETTING_METHODS, 'settings', metrics),
    revocations: instrument(store.revocations, REVOCATION_METHODS, 'revocations', metrics),
    records: instrument(store.records, RECORD_METHODS, 'records', metrics),
    apiKeys: instrument(store.apiKeys, API_KEY_METHODS, 'apiKeys', metrics),
    rateLimiter: (rule) => store.rateLimiter(rule),
    ping: timed(store, store.ping as AsyncMethod, metrics.storeOperation('store', 'ping')) as Store['ping'],
    committed: timed(store, store.committed as AsyncMethod, metrics.storeOperation('store', 'committed')) as Store['committed'],
    close: () => store.close(),
  };
}

function instrument<T extends object>(facet: T, methods: EveryMethod<T>, name: string, metrics: Metrics): T {
  const wrapped: Partial<Record<keyof T, AsyncMethod>> = {};
  for (const method of Object.keys(methods) as Array<keyof T & string>) {
    wrapped[method] = timed(facet, facet[method] as AsyncMethod, metrics.storeOperation(name, method));
  }
  return wrapped as T;
}

function timed(target: object, method: AsyncMethod, operation: StoreOperationMetrics): AsyncMethod {
  // No async frame of its own: an operation's promise gets one reaction, counted once it settles.
  return (...args) => {
    const started = performance.now();
    const failed = (error: unknown) => {
      operation.failed(error);
      operation.observe(performance.now() - started);
      throw error;
    };
    let pending: Promise<unknown>;
    try {
      pending = Promise.resolve(method.apply(target, args));
    } catch (error) {
      pending = Promise.reject(error);
    }
    return pending.then((value) => {
      operation.observe(performance.now() - started);
      return value;
    }, failed);
  };
}
