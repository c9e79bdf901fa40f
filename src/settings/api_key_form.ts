import { parseDuration } from '../../config/duration.ts';

/** The lifetimes the form offers; the first one the admin did not change is 90 days. */
export const EXPIRY_CHOICES: ReadonlyArray<{ value: string; label: string }> = [
  { value: '7d', label: '7 days' },
  { value: '30d', label: '30 days' },
  { value: '90d', label: '90 days' },
  { value: '365d', label: '1 year' },
  { value: 'never', label: 'Never' },
];
export const DEFAULT_EXPIRY = '90d';

export type ApiKeyRequest = { name: string; expiresIn: number | undefined };

/** What is wrong with the form, the name given (to show again), and the field to fix, if it is one field. */
export type ApiKeyFormRefusal = { error: string; name: string; field?: 'name' | 'expiry'; status?: number };

/**
 * The create-key form, checked: a name and one of the lifetimes offered. Everything else about
 * the name (length, control, direction and invisible characters) ApiKeys.create checks, as it does
 * for the admin CLI.
 */
export function readApiKeyForm(body: Record<string, unknown>): { request: ApiKeyRequest } | ApiKeyFormRefusal {
  const name = typeof body.name === 'string' ? body.name : '';
  const expiry = typeof body.expires_in === 'string' ? body.expires_in : '';
  if (!name.trim()) return { error: 'Give the key a name, so you can tell it apart later.', name, field: 'name' };
  if (!EXPIRY_CHOICES.some((choice) => choice.value === expiry)) return { error: 'Choose when the key expires.', name, field: 'expiry' };
  return { request: { name, expiresIn: expiry === 'never' ? undefined : parseDuration(expiry) } };
}
