import { randomBytes } from 'node:crypto';

import { SETTINGS_CLIENT_ID } from './first_party.ts';

/**
 * A new client id, for registrations (the engine's `idFactory`) and for the clients an operator
 * creates with the admin CLI. Prefixed so an id never starts with "-" (safe to pass to the admin
 * CLI and shells).
 */
export function newClientId(): string {
  return `cl_${randomBytes(24).toString('base64url')}`;
}

/** A client id this server issues (newClientId), the settings area's, or a metadata document's URL. */
const CLIENT_ID_SHAPE = new RegExp(`^(?:cl_[A-Za-z0-9_-]{32}|${SETTINGS_CLIENT_ID}|https://.+)$`);

/**
 * Whether a value could be a client id of this server. A refused request's `client_id` that could
 * not is whatever the caller put in the field (a client secret pasted into the wrong one, say), and
 * is not written to a log as given.
 */
export function couldBeClientId(value: string): boolean {
  return CLIENT_ID_SHAPE.test(value);
}
