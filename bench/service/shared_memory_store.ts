/**
 * Stands in for adapters/index.ts inside a `--store memory` service process (see memory_preload.ts):
 * every `openStore('memory:')` in the process gets the one same store, so what the bench seeds is
 * what the service reads. Everything else is adapters/index.ts unchanged.
 */
import { openStore as openOwnStore } from '../../adapters/index.ts';
import type { Store } from '../../adapters/store.ts';

export * from '../../adapters/index.ts';

let shared: Store | undefined;
let announce: (store: Store) => void = () => {};
/** Resolves when the service opens its store. */
export const sharedStoreOpened = new Promise<Store>((resolve) => { announce = resolve; });

export function openStore(url: string): Store {
  if (url !== 'memory:') return openOwnStore(url);
  if (!shared) {
    shared = openOwnStore(url);
    announce(shared);
  }
  return withoutClose(shared);
}

/** Every opener closes "its" store when done (the admin CLI does at once); the one store must outlive them. */
function withoutClose(store: Store): Store {
  return new Proxy(store, {
    get(target, property) {
      if (property === 'close') return async () => {};
      const value: unknown = Reflect.get(target, property, target);
      // Bound to the real store: its methods may use private fields, which a proxy `this` lacks.
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
