import type { Client, KoaContextWithOIDC, Provider } from 'oidc-provider';

import type { ModelPayload, ModelStore } from '../../adapters/store.ts';
import type { Logger } from '../shared/logger.ts';
import { UNUSED_UNTIL_METADATA, WORKSPACE_METADATA } from './registration.ts';
import { nowSeconds, secondsUntil } from '../shared/clock.ts';

/**
 * Clients that registered themselves and never completed a flow are removed after a while
 * (UNUSED_CLIENT_TTL), so a registration flood cannot fill the store. At open registration a
 * client gets `unused_until` (seconds since the epoch, kept by the server, never shown), and its
 * record and its registration access token are stored to expire then: the store removes them,
 * no sweeper needed. The first token it obtains ends the probation: both are stored again
 * without that expiry. Clients an operator vetted (an initial access token), and clients stored
 * before this existed, have no `unused_until` and are never removed.
 */

const unusedUntilByClient = new WeakMap<Client, number | undefined>();

/** When a client on probation expires; undefined once it has obtained a token (kept per engine Client instance). */
function unusedUntil(client: Client): number | undefined {
  if (!unusedUntilByClient.has(client)) {
    const value = client.metadata()[UNUSED_UNTIL_METADATA];
    unusedUntilByClient.set(client, typeof value === 'number' ? value : undefined);
  }
  return unusedUntilByClient.get(client);
}

/**
 * Seconds a stored client record on probation has left (at least 1), or undefined when it has none;
 * with their fraction, so that storing it again keeps the same second of expiry.
 */
function secondsLeft(payload: ModelPayload | undefined): number | undefined {
  const until = payload?.[UNUSED_UNTIL_METADATA];
  return typeof until === 'number' ? Math.max(1, secondsUntil(until)) : undefined;
}

/**
 * The engine's metadata hook for `unused_until`: set at open registration when a period is
 * configured, kept as it was by an RFC 7592 update (an update is not a use), never taken from a request.
 */
export function keepUnusedUntil(ctx: KoaContextWithOIDC | undefined, key: string, metadata: Record<string, unknown>, ttl: number | undefined): void {
  if (key !== UNUSED_UNTIL_METADATA) return;
  const route = ctx?.oidc?.route;
  if (route === 'registration') {
    // The workspace is resolved first (it precedes this property): a bound client was vetted.
    if (ttl && !metadata[WORKSPACE_METADATA]) metadata[UNUSED_UNTIL_METADATA] = nowSeconds() + ttl;
    else delete metadata[UNUSED_UNTIL_METADATA];
  } else if (route === 'client_update') {
    const current = ctx?.oidc.client && unusedUntil(ctx.oidc.client);
    if (current) metadata[UNUSED_UNTIL_METADATA] = current;
    else delete metadata[UNUSED_UNTIL_METADATA];
  }
}

/** The expiry of a client record as stored: its probation's end, if it is on probation. */
export function clientExpiry(payload: ModelPayload, expiresIn: number | undefined): number | undefined {
  return secondsLeft(payload) ?? expiresIn;
}

/**
 * The expiry of a registration access token: never later than its client's probation, so the
 * token goes with a client that goes.
 */
export function registrationAccessTokenExpiry(clients: ModelStore): (payload: ModelPayload, expiresIn: number | undefined) => Promise<number | undefined> {
  return async (payload, expiresIn) => {
    const left = typeof payload.clientId === 'string' ? secondsLeft(await clients.find(payload.clientId)) : undefined;
    if (left === undefined) return expiresIn;
    return expiresIn ? Math.min(expiresIn, left) : left;
  };
}

export interface ProbationStores {
  /** The store's client records, as the engine's Client adapter keeps them. */
  clients: ModelStore;
  registrationAccessTokens: ModelStore;
}

/**
 * Ends a client's probation at its first token (the engine's `grant.success`): the client record
 * and its registration access token are stored again without the probation's expiry. Checked
 * per engine Client instance, so a client past probation costs one map lookup per token request.
 */
export function endProbationOnFirstToken(provider: Provider, stores: ProbationStores, logger: Logger): void {
  provider.on('grant.success', (ctx: KoaContextWithOIDC) => {
    const client = ctx.oidc.client;
    if (!client || unusedUntil(client) === undefined) return;
    unusedUntilByClient.set(client, undefined);
    endProbation(client.clientId, stores).catch((error: unknown) => {
      // The next token request tries again (a fresh Client instance is read after the propagation bound).
      logger.warn('could not end an unused client\'s probation', { client_id: client.clientId, error: (error as Error).name });
    });
  });
}

async function endProbation(clientId: string, { clients, registrationAccessTokens }: ProbationStores): Promise<void> {
  const record = await clients.find(clientId);
  if (!record || record[UNUSED_UNTIL_METADATA] === undefined) return;
  const { [UNUSED_UNTIL_METADATA]: _ended, ...kept } = record;
  await clients.upsert(clientId, kept, undefined);
  for (const { id, payload } of await registrationAccessTokens.listBy(clientId)) {
    const left = typeof payload.exp === 'number' ? Math.max(1, secondsUntil(payload.exp)) : undefined;
    await registrationAccessTokens.upsert(id, payload, left);
  }
}
