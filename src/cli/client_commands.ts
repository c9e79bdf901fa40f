import type { Store } from '../../adapters/store.ts';
import { AccountError } from '../accounts/accounts.ts';
import { looksLikeApiKey } from '../api_keys/format.ts';
import { couldBeClientId } from '../clients/client_ids.ts';
import { FAPI_METADATA } from '../clients/fapi.ts';
import { WORKSPACE_METADATA } from '../clients/registration.ts';
import { INTROSPECTION_AUDIENCE } from '../clients/resource_servers.ts';
import { nowSeconds } from '../shared/clock.ts';
import { namedBack } from '../shared/named_back.ts';
import { revocationEntries } from '../tokens/revocation_list.ts';
import { UsageError, waitForPropagation, type Command } from './command.ts';

/** The admin CLI's `client` commands: the registered clients, and deleting one with its tokens. */

const list: Command = {
  name: 'client list',
  synopsis: '',
  description: 'Every registered client (resource servers too), oldest first: never a secret.',
  options: [],
  async run({ store }) {
    const clients = (await store.model('Client').list()).map(({ payload }) => ({
      client_id: payload.client_id,
      client_name: payload.client_name,
      grant_types: payload.grant_types,
      redirect_uris: payload.redirect_uris,
      token_endpoint_auth_method: payload.token_endpoint_auth_method,
      [WORKSPACE_METADATA]: payload[WORKSPACE_METADATA],
      [INTROSPECTION_AUDIENCE]: payload[INTROSPECTION_AUDIENCE],
      [FAPI_METADATA]: payload[FAPI_METADATA],
    }));
    const lines = clients.map((c) => `${String(c.client_id)}\t${String(c.client_name ?? '')}\t${(c.grant_types as string[] | undefined)?.join(',') ?? ''}`);
    return { text: lines.join('\n') || '(no clients)', json: clients };
  },
};

const remove: Command = {
  name: 'client delete',
  synopsis: 'CLIENT_ID',
  description: 'Deletes the client; its access tokens are refused on every instance by the time the command returns.\n'
    + 'An id beginning with "-" goes after --: client delete -- -id.',
  options: [],
  arguments: 1,
  async run({ store, args: [clientId] }) {
    if (!clientId) throw new UsageError('name the client: client delete CLIENT_ID');
    if (!await deleteClient(store, clientId)) throw new AccountError(`no client with ${namedBack('id', clientId, mayBeClientId(clientId))}`);
    await waitForPropagation();
    return { text: `deleted client ${clientId}`, json: { deleted: clientId } };
  },
};

export const CLIENT_COMMANDS: readonly Command[] = [list, remove];

/**
 * Whether a value given for a client id may be one, mistyped included: this server's shape, or a
 * short value that is no API key. A client secret (512 bits, 86 characters) or an API key pasted
 * there is not.
 */
function mayBeClientId(value: string): boolean {
  return couldBeClientId(value) || (value.length <= 48 && !looksLikeApiKey(value));
}

/**
 * Deletes a client and its registration access tokens, and refuses its access tokens, which are
 * never stored, through the revocation list on every instance (within PROPAGATION_BOUND_MS). False
 * when there is no such client.
 */
export async function deleteClient(store: Store, clientId: string): Promise<boolean> {
  const clients = store.model('Client');
  if (!await clients.find(clientId)) return false;
  // As the engine's RFC 7592 delete does: a kept client's token has no expiry, and would stay for
  // good. The tokens go first: an RFC 7592 update that has not claimed its token yet then finds
  // none, and stores nothing (src/engine/registration_token_claims.ts).
  const registrationTokens = store.model('RegistrationAccessToken');
  for (const { id } of await registrationTokens.listBy(clientId)) await registrationTokens.destroy(id);
  await clients.destroy(clientId);
  await store.revocations.add(revocationEntries.deletedClient(clientId, nowSeconds()));
  return true;
}
