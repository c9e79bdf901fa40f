import { invalidRequest } from '../shared/http_error.ts';

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

/**
 * A cursor names a position in one object's list. Opaque to clients (base64url), bound to the
 * object so a cursor from another list is refused rather than silently misread.
 */
export function encodeCursor(object: string, position: number): string {
  return Buffer.from(`${object}:${position}`).toString('base64url');
}

export function decodeCursor(object: string, cursor: string): number {
  const match = /^([a-z]+):(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match || match[1] !== object || encodeCursor(object, Number(match[2])) !== cursor) {
    throw invalidRequest('starting_after is not a cursor of this list; use the endCursor of the previous page');
  }
  return Number(match[2]);
}

export function pageSize(limit: string | string[] | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE_SIZE;
  const value = Array.isArray(limit) ? undefined : Number(limit);
  if (value === undefined || !/^\d+$/.test(String(limit)) || value < 1 || value > MAX_PAGE_SIZE) {
    throw invalidRequest(`limit must be a whole number from 1 to ${MAX_PAGE_SIZE}`);
  }
  return value;
}
