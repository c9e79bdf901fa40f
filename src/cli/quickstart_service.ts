import { calculateJwkThumbprint, type JWK } from 'jose';

import { ENGINE_ROUTES } from '../engine/routes.ts';

/**
 * What the quickstart learns from the service it prints URLs for, before it writes anything:
 * whether it answers at the base URL, and whether it is the service over the store the quickstart
 * writes to. The service publishes the public half of the signing keys kept in its store, so a
 * service publishing none of the keys in this store runs on another one (another STORE, or another
 * SQLite file), and what the quickstart would create there would be unknown to it.
 */

export type ServiceAnswer =
  | { answers: 'this store' }
  | { answers: 'another store' }
  /** `why`: "nothing answers at <URL> (ECONNREFUSED)", or what answers there is not the service. */
  | { answers: 'not the service'; why: string };

/** Long enough for a service starting up or far away; a quickstart against no service waits no longer. */
const PROBE_TIMEOUT_MS = 5000;

export async function probeService(baseUrl: string, storeKeys: readonly JWK[]): Promise<ServiceAnswer> {
  let response: Response;
  try {
    response = await fetch(`${baseUrl}${ENGINE_ROUTES.jwks}`, { redirect: 'manual', signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
  } catch (error) {
    return { answers: 'not the service', why: `nothing answers at ${baseUrl} (${networkReason(error)})` };
  }
  const published = await response.json().then((body: unknown) => (body as { keys?: unknown }).keys, () => undefined);
  if (!response.ok || !Array.isArray(published)) {
    return { answers: 'not the service', why: `what answers at ${baseUrl} is not this service (${ENGINE_ROUTES.jwks} answered ${response.status}, not a key set)` };
  }
  const ours = new Set(await Promise.all(storeKeys.map((key) => calculateJwkThumbprint(key))));
  const theirs = await Promise.all((published as JWK[]).map((key) => calculateJwkThumbprint(key).catch(() => '')));
  return theirs.some((thumbprint) => ours.has(thumbprint)) ? { answers: 'this store' } : { answers: 'another store' };
}

/** Why a request went unanswered, in a few words: the cause fetch wraps (ECONNREFUSED, a timeout). */
export function networkReason(error: unknown): string {
  if (error instanceof DOMException && error.name === 'TimeoutError') return 'no answer within seconds';
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message;
}
