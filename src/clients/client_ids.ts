import { randomBytes } from 'node:crypto';

/**
 * A new client id, for registrations (the engine's `idFactory`) and for the clients an operator
 * creates with the admin CLI. Prefixed so an id never starts with "-" (safe to pass to the admin
 * CLI and shells).
 */
export function newClientId(): string {
  return `cl_${randomBytes(24).toString('base64url')}`;
}
