import type { Middleware } from 'koa';
import type { Provider } from 'oidc-provider';

import { fapiAuthMethodRule, isFapiClientOf } from '../../clients/fapi.ts';
import { clientOfRequest } from '../../engine/clients_per_request.ts';
import { HttpError } from '../../shared/http_error.ts';
import { tokenRequestClientId } from '../token_request_form.ts';

/**
 * A FAPI 2.0 client authenticates with private_key_jwt only. Registration refuses any other method
 * for one (src/clients/fapi.ts), but a client stored before FAPI=on may have a secret or none: it
 * still loads (its pages and grants show), and its token and pushed authorization requests are
 * refused here, before the engine authenticates it and before a code or refresh token is used:
 * 401 invalid_client, saying why.
 */
export function fapiClientsUseKeys(provider: Provider): Middleware {
  return async (ctx, next) => {
    const clientId = await tokenRequestClientId(ctx);
    // An unknown or broken client is the engine's to answer. Loaded once: the engine's client authentication gets this one.
    const client = clientId === undefined ? undefined : await clientOfRequest(provider, ctx, clientId).catch(() => undefined);
    if (client && client.clientAuthMethod !== 'private_key_jwt' && isFapiClientOf(provider, client)) {
      const headers: Record<string, string> = { 'Access-Control-Allow-Origin': '*' };
      // RFC 6749 5.2: a client that tried HTTP Basic is told the scheme.
      if (/^basic\s/i.test(ctx.get('authorization'))) headers['WWW-Authenticate'] = 'Basic realm="oauth"';
      throw new HttpError(401, 'invalid_client', `this client cannot be used here: ${fapiAuthMethodRule(client.clientAuthMethod)}`, headers);
    }
    await next();
  };
}
