import { AsyncLocalStorage } from 'node:async_hooks';

import type { Context } from 'koa';
import { Provider, type Client } from 'oidc-provider';

/**
 * A request loads its client once. The host's steps before a token or pushed authorization
 * request (the FAPI check, src/http/endpoints/fapi_clients.ts) need the client, and so does the
 * engine's client authentication right after; each engine lookup reads the record, serialises
 * and hashes all of it to find the engine's instance for it. What the host loaded for a request
 * is what the engine gets when it asks for the same client during that request: the engine runs
 * on the host's Koa context (koa-mount), which is its Provider.ctx.
 *
 * Kept per request, never longer, so a client updated or deleted between two requests is seen
 * exactly as the engine alone would see it.
 */
const loaded = new WeakMap<object, Map<string, Promise<Client | undefined>>>();

/**
 * The request a lookup the host makes is for. The engine names its request to the steps it runs
 * (a metadata document's fetch among them: src/engine/new_metadata_documents.ts) only once it
 * runs; a lookup the host makes before it is named here, so those steps count it alike.
 */
const hostLookups = new AsyncLocalStorage<Context>();

/** The request the host's client lookup under way is for; undefined outside one. */
export function requestOfHostLookup(): Context | undefined {
  return hostLookups.getStore();
}

/** The client `clientId` names, as the engine finds it, loaded once for this request (`ctx`). */
export function clientOfRequest(provider: Provider, ctx: Context, clientId: string): Promise<Client | undefined> {
  let clients = loaded.get(ctx);
  if (!clients) loaded.set(ctx, clients = new Map());
  let client = clients.get(clientId);
  if (!client) {
    client = hostLookups.run(ctx, () => provider.Client.find(clientId));
    clients.set(clientId, client);
  }
  return client;
}

/** Makes the engine's Client.find answer from what the request already loaded (clientOfRequest). */
export function findClientsOncePerRequest(provider: Provider): void {
  const Client = provider.Client;
  const find = Client.find.bind(Client);
  Client.find = (id: string) => {
    const ctx: object | undefined = Provider.ctx;
    return (ctx && loaded.get(ctx)?.get(id)) ?? find(id);
  };
}
