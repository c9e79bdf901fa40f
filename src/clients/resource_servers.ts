import type { Client, KoaContextWithOIDC, Provider } from 'oidc-provider';

import { storeOperatorClient } from './operator_clients.ts';

/**
 * Resource servers an operator registered: confidential clients that may introspect (RFC 7662)
 * the access tokens whose audience is the resource they serve, whoever those tokens were issued
 * to. The right is the client metadata property below, the resource's identifier (the tokens'
 * `aud`, e.g. `{BASE_URL}/rest`). Only an operator sets it (`admin resource-server create`):
 * open registration (RFC 7591) and client management (RFC 7592) never take it from a request.
 */
export const INTROSPECTION_AUDIENCE = 'introspection_audience';

export const RESOURCE_SERVER_AUTH_METHODS = ['client_secret_basic', 'client_secret_post'] as const;
export type ResourceServerAuthMethod = (typeof RESOURCE_SERVER_AUTH_METHODS)[number];

export function isResourceServerAuthMethod(value: string): value is ResourceServerAuthMethod {
  return (RESOURCE_SERVER_AUTH_METHODS as readonly string[]).includes(value);
}

const audiences = new WeakMap<Client, string | undefined>();

/**
 * The audience whose access tokens the client may introspect, if an operator gave it one. Kept
 * per engine Client instance (the engine reuses one for as long as its record is unchanged):
 * `metadata()` rebuilds the whole record, too slow for every introspection.
 */
export function introspectionAudience(client: Client): string | undefined {
  if (!audiences.has(client)) {
    const audience = client.metadata()[INTROSPECTION_AUDIENCE];
    audiences.set(client, typeof audience === 'string' && audience !== '' ? audience : undefined);
  }
  return audiences.get(client);
}

/**
 * Part of the engine's `extraClientMetadata.validator`: metadata that comes with a request
 * (registration, or an RFC 7592 update; the engine passes `ctx` only then) never sets the
 * property. A registration loses it; an update keeps the client's current value, whatever the
 * request says, so a registrant can neither grant itself the right nor drop one an operator gave.
 * Clients loaded from the store (no `ctx`) keep what the operator stored.
 */
export function keepOperatorIntrospectionAudience(
  ctx: KoaContextWithOIDC | undefined,
  key: string,
  _value: unknown,
  metadata: Record<string, unknown>,
): void {
  if (key !== INTROSPECTION_AUDIENCE || !ctx) return;
  const current = ctx.oidc?.route === 'client_update' && ctx.oidc.client ? introspectionAudience(ctx.oidc.client) : undefined;
  if (current === undefined) delete metadata[INTROSPECTION_AUDIENCE];
  else metadata[INTROSPECTION_AUDIENCE] = current;
}

export interface CreatedResourceServer {
  client_id: string;
  /** Shown once: only its hash is stored. */
  client_secret: string;
  client_name: string;
  token_endpoint_auth_method: ResourceServerAuthMethod;
  [INTROSPECTION_AUDIENCE]: string;
}

/**
 * Registers a resource server for `audience`: a confidential client with no grant types and no
 * redirect URIs (it never gets tokens, it only introspects them), no registration access token
 * (the operator manages it: `client list`, `client delete`). Stored by storeOperatorClient, as a
 * registered client is (secret hashed).
 */
export async function createResourceServer(
  provider: Provider,
  name: string,
  audience: string,
  authMethod: ResourceServerAuthMethod,
): Promise<CreatedResourceServer> {
  const { client_id, client_secret } = await storeOperatorClient(provider, {
    client_name: name,
    grant_types: [],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: authMethod,
    [INTROSPECTION_AUDIENCE]: audience,
  });
  return {
    client_id,
    client_secret,
    client_name: name,
    token_endpoint_auth_method: authMethod,
    [INTROSPECTION_AUDIENCE]: audience,
  };
}
