import type { Client } from 'oidc-provider';

import { SETTINGS_CLIENT_ID } from './first_party.ts';
import { clientWorkspace } from './registration.ts';

/**
 * Whether an operator stands behind a client. A client that registered with an initial access
 * token was let in by a workspace admin (the token binds it to that workspace), and the settings
 * area's own client is part of the service; one that registered itself at open registration was
 * vetted by nobody, so its redirect URIs are not trusted (RFC 9700 section 4.11.2) and its pages
 * say so.
 */
export function isVetted(client: Client): boolean {
  return client.clientId === SETTINGS_CLIENT_ID || clientWorkspace(client) !== undefined;
}
