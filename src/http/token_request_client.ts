import type { Context } from 'koa';

import { tokenRequestForm } from './token_request_form.ts';

/**
 * The client_id a token request names, before the engine reads it: from HTTP Basic
 * (RFC 6749 2.3.1, form-encoded id), else from the form body. Undefined when it names none, or
 * not exactly one (the engine refuses those itself).
 */
export async function tokenRequestClientId(ctx: Context): Promise<string | undefined> {
  const basic = basicClientId(ctx.get('authorization'));
  if (basic !== undefined) return basic;
  const ids = (await tokenRequestForm(ctx))?.getAll('client_id') ?? [];
  return ids.length === 1 && ids[0] ? ids[0] : undefined;
}

function basicClientId(header: string): string | undefined {
  const [scheme, credentials] = header.split(' ');
  if (scheme?.toLowerCase() !== 'basic' || !credentials) return undefined;
  const decoded = Buffer.from(credentials, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 1) return undefined;
  try {
    return decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, '%20'));
  } catch {
    return undefined;
  }
}
