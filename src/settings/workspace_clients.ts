import type { ModelStore } from '../../adapters/store.ts';

/** A client bound to a workspace, as the settings page lists it: never its secret or its registration token. */
export interface BoundClient {
  clientId: string;
  name: string;
  grantTypes: string[];
  /** Seconds since the epoch (RFC 7591 `client_id_issued_at`), when known. */
  registeredAt: number | undefined;
}

/**
 * The clients registered with an initial access token a workspace admin made for this workspace
 * (`workspace_id`, src/clients/registration.ts): the ones that may get workspace tokens with client
 * credentials, with no user. Listed by workspace (ModelStore.listBy), oldest first.
 */
export async function boundClients(clients: ModelStore, workspaceId: string): Promise<BoundClient[]> {
  const records = await clients.listBy(workspaceId);
  return records
    .filter(({ payload }) => payload.workspace_id === workspaceId)
    .map(({ id, payload }) => ({
      clientId: id,
      name: typeof payload.client_name === 'string' && payload.client_name ? payload.client_name : id,
      grantTypes: Array.isArray(payload.grant_types) ? payload.grant_types.filter((type): type is string => typeof type === 'string') : [],
      registeredAt: typeof payload.client_id_issued_at === 'number' ? payload.client_id_issued_at : undefined,
    }))
    .sort((a, b) => (a.registeredAt ?? 0) - (b.registeredAt ?? 0));
}
