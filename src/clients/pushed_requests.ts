import { SETTINGS_CLIENT_ID } from './first_party.ts';

/**
 * PAR_REQUIRED=on (RFC 9126): every client pushes its authorization requests first, whether it
 * registered before or after the setting, except the settings area's own sign-in client, whose
 * request the service makes itself and which never gets a token (src/clients/first_party.ts).
 * The engine's own switch for this would hold that client to it too, and no one could sign in to
 * the settings area; so the engine's stays off and this sets `require_pushed_authorization_requests`
 * on each client as the engine loads it. Discovery says so (src/engine/provider.ts).
 */
export function requirePushedRequests(metadata: Record<string, unknown>, everyClient: boolean): void {
  if (everyClient && metadata.client_id !== SETTINGS_CLIENT_ID) metadata.require_pushed_authorization_requests = true;
}
