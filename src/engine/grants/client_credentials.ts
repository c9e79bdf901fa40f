import { errors, type Provider, type ResourceServer, type TokenEndpointGrantContext } from 'oidc-provider';

import { clientWorkspace } from '../../clients/registration.ts';
import { effectiveScope } from '../scopes.ts';

/**
 * The client_credentials grant, registered in place of the engine's own so the product's rules
 * apply: the token is workspace-level (the client must be bound to a workspace), the scope
 * defaults to `api`, and `api` is the only scope that means anything without a user.
 */
export function registerClientCredentialsGrant(provider: Provider, audience: string, resourceServer: ResourceServer): void {
  const handler = async (ctx: TokenEndpointGrantContext<{ scope?: string; resource?: string | string[] }>) => {
    const { client, params } = ctx.oidc;
    if (!clientWorkspace(client)) {
      throw new errors.UnauthorizedClient('client_credentials is only for clients bound to a workspace');
    }
    if (params.resource !== undefined && params.resource !== audience) {
      throw new errors.InvalidTarget(`unknown resource; this server issues tokens for ${audience} only`);
    }
    const scope = effectiveScope(params.scope);
    const userScopes = scope.split(' ').filter((value) => value !== 'api');
    if (userScopes.length) {
      throw new errors.InvalidScope(`client_credentials tokens are tied to no user, so only the api scope applies; remove ${userScopes.join(' ')}`, userScopes.join(' '));
    }

    const token = new provider.ClientCredentials({ client, scope });
    token.resourceServer = new provider.ResourceServer(audience, resourceServer);
    ctx.oidc.entity('ClientCredentials', token);
    const accessToken = await token.save();

    ctx.body = {
      access_token: accessToken,
      expires_in: token.expiration,
      token_type: 'Bearer',
      scope,
    };
  };
  provider.registerGrantType('client_credentials', handler, ['scope', 'resource'], ['resource']);
}
