import { errors, type Provider, type TokenEndpointGrantContext } from 'oidc-provider';
import validateDpop from 'oidc-provider/lib/helpers/validate_dpop.js';
import { applyDpopBinding } from 'oidc-provider/lib/helpers/grant_common.js';
import { checkDpopRequired } from 'oidc-provider/lib/helpers/sender_constraints.js';

import type { ProtectedResources } from '../../clients/protected_resources.ts';
import { clientWorkspace } from '../../clients/registration.ts';
import { assertProofFor, resourceServerInfo, unknownResource } from '../resource_indicators.ts';
import { effectiveScope, namesAScope, withinClientScope } from '../scopes.ts';

/**
 * The client_credentials grant, registered in place of the engine's own so the product's rules
 * apply: the token is workspace-level (the client must be bound to a workspace), the scope
 * defaults to `api` (within the scope the client registered, if it did), and `api` is the only
 * scope that means anything without a user. The token is for the data API unless the request
 * names (RFC 8707) another API this server issues tokens for.
 * A request with a DPoP proof gets a token bound to its key, through the engine's own steps.
 */
export function registerClientCredentialsGrant(provider: Provider, resources: ProtectedResources, defaultResource: string): void {
  const handler = async (ctx: TokenEndpointGrantContext<{ scope?: string; resource?: string | string[] }>) => {
    const { client, params } = ctx.oidc;
    const dPoP = await validateDpop(provider, ctx);
    if (!clientWorkspace(client)) {
      throw new errors.UnauthorizedClient('client_credentials is only for clients bound to a workspace');
    }
    if (Array.isArray(params.resource)) throw new errors.InvalidTarget('one resource at most in a token request (RFC 8707 section 2)');
    const resource = params.resource ?? defaultResource;
    const api = await resources.find(resource);
    if (!api) throw new errors.InvalidTarget(unknownResource(resource));
    assertProofFor(api, dPoP !== undefined);
    const scope = effectiveScope(params.scope);
    const userScopes = scope.split(' ').filter((value) => value !== 'api');
    if (userScopes.length) {
      throw new errors.InvalidScope(`client_credentials tokens are tied to no user, so only the api scope applies; remove ${userScopes.join(' ')}`, userScopes.join(' '));
    }
    withinClientScope(scope, client.scope, namesAScope(params.scope));
    if (!api.scopes.includes('api')) throw new errors.InvalidScope(`${api.name} does not accept the api scope`, 'api');

    const token = new provider.ClientCredentials({ client, scope });
    token.resourceServer = new provider.ResourceServer(resource, resourceServerInfo(api));
    await applyDpopBinding(provider, ctx, dPoP, token);
    checkDpopRequired(provider, ctx, dPoP);
    ctx.oidc.entity('ClientCredentials', token);
    const accessToken = await token.save();

    ctx.body = {
      access_token: accessToken,
      expires_in: token.expiration,
      token_type: token.tokenType,
      scope,
    };
  };
  provider.registerGrantType('client_credentials', handler, ['scope', 'resource'], ['resource']);
}
