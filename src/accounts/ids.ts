import { randomBytes } from 'node:crypto';

/** Readable, prefixed, unguessable identifiers: `ws_…` for workspaces, `usr_…` for users. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(ID_BYTES).toString('base64url')}`;
}

type IdPrefix = 'ws' | 'usr';
const ID_BYTES = 12;
// The prefix and the characters newId uses, of any length up to twice its own: a mistyped or cut id has the shape too.
const ID_SHAPE = { ws: /^ws_[A-Za-z0-9_-]{1,32}$/, usr: /^usr_[A-Za-z0-9_-]{1,32}$/ } as const satisfies Record<IdPrefix, RegExp>;

/** Whether a value has the shape of an id of this kind (whether or not one exists). */
export function hasIdShape(prefix: IdPrefix, value: string): boolean {
  return ID_SHAPE[prefix].test(value);
}
