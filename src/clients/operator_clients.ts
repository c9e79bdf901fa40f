import { randomBytes } from 'node:crypto';

import type { Adapter, ClientMetadata, Provider } from 'oidc-provider';

import { newClientId } from './client_ids.ts';
import { nowSeconds } from '../shared/clock.ts';

export interface StoredOperatorClient {
  client_id: string;
  /** Shown once: only its hash is stored. */
  client_secret: string;
}

/**
 * Stores a confidential client an operator creates (a resource server, the quickstart's demo
 * client) without a running service: a new client ID, a 512-bit secret (as the engine's
 * registrations) and the issue time are added to `metadata`, the whole checked by the engine's own
 * Client validation (what the engine would refuse to load is refused before anything is stored),
 * then written through the engine's Client adapter, so it is stored as a registered client is
 * (secret hashed). No registration access token: the operator manages it (`client list`,
 * `client delete`).
 */
export async function storeOperatorClient(
  provider: Provider,
  metadata: Omit<ClientMetadata, 'client_id' | 'client_secret' | 'client_id_issued_at'>,
): Promise<StoredOperatorClient> {
  const stored = {
    client_id: newClientId(),
    client_secret: randomBytes(64).toString('base64url'),
    client_id_issued_at: nowSeconds(),
    ...metadata,
  };
  await provider.Client.validate(stored);
  // The engine's Client model has a static `adapter` (lib/models/client.js), absent from its types.
  const { adapter } = provider.Client as unknown as { adapter: Adapter };
  await adapter.upsert(stored.client_id, stored, 0);
  return { client_id: stored.client_id, client_secret: stored.client_secret };
}
