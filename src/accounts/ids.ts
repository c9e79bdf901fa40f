import { randomBytes } from 'node:crypto';

/** Readable, prefixed, unguessable identifiers: `ws_…` for workspaces, `usr_…` for users. */
export function newId(prefix: 'ws' | 'usr'): string {
  return `${prefix}_${randomBytes(12).toString('base64url')}`;
}
