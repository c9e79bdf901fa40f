import { digest } from '../shared/digest.ts';
import { invalidRequest } from '../shared/http_error.ts';

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

/** A list a cursor is of: one object's records in one workspace. */
export interface CursorList {
  workspaceId: string;
  object: string;
}

/**
 * A cursor names a position in one list. Opaque to clients (base64url), bound to the object and
 * the workspace (by a digest of its id), so a cursor from another list, another workspace's
 * included, is refused rather than silently read as a position in this one: a client holding
 * credentials for two workspaces that mixed up their cursors would otherwise get a page short.
 */
export function encodeCursor(list: CursorList, position: number): string {
  return Buffer.from(`${list.object}:${position}:${workspaceTag(list.workspaceId)}`).toString('base64url');
}

export function decodeCursor(list: CursorList, cursor: string): number {
  const match = /^([a-z]+):(\d{1,15}):[A-Za-z0-9_-]+$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match || match[1] !== list.object || encodeCursor(list, Number(match[2])) !== cursor) {
    throw invalidRequest('starting_after is not a cursor of this list; use the endCursor of the previous page');
  }
  return Number(match[2]);
}

/** Enough of a digest of the workspace's id to tell one workspace's cursors from another's. */
function workspaceTag(workspaceId: string): string {
  return digest(workspaceId).slice(0, 8);
}

export function pageSize(limit: string | string[] | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE_SIZE;
  const value = Array.isArray(limit) ? undefined : Number(limit);
  if (value === undefined || !/^\d+$/.test(String(limit)) || value < 1 || value > MAX_PAGE_SIZE) {
    throw invalidRequest(`limit must be a whole number from 1 to ${MAX_PAGE_SIZE}`);
  }
  return value;
}
