import { errors, type Client, type KoaContextWithOIDC, type Provider } from 'oidc-provider';
import type { Middleware } from 'koa';

import { findInitialAccessToken, useOnRegistration } from './initial_access_tokens.ts';

/**
 * Dynamic client registration policy (RFC 7591 / RFC 7592), applied through the engine's
 * `extraClientMetadata` hook, which runs before the engine's own metadata checks:
 * - a client registered for authorization_code also gets refresh_token;
 * - redirect URIs are https, http on loopback, or a private-use scheme (native apps, RFC 8252);
 * - client_credentials needs a workspace, which only an initial access token made by a
 *   workspace admin can give (`workspace_id`, never taken from the request body).
 */
export const WORKSPACE_METADATA = 'workspace_id';

const workspaces = new WeakMap<Client, string | undefined>();

/**
 * The workspace a client is bound to, if any. The engine reuses a Client instance for as long as
 * its record is unchanged, so the answer is kept per instance: `metadata()` rebuilds the whole
 * record, too slow to call on every token request.
 */
export function clientWorkspace(client: Client): string | undefined {
  if (!workspaces.has(client)) {
    const workspace = client.metadata()[WORKSPACE_METADATA];
    workspaces.set(client, typeof workspace === 'string' ? workspace : undefined);
  }
  return workspaces.get(client);
}

/** Where the registration request's workspace (from its initial access token) is handed to the metadata hook. */
interface RegistrationState {
  registrationWorkspace?: string;
}

const LOOPBACK = new Set(['127.0.0.1', '[::1]', 'localhost']);
const WEB_SCHEMES = new Set(['http:', 'https:']);

type Metadata = Record<string, unknown>;

export function validateClientMetadata(ctx: KoaContextWithOIDC | undefined, key: string, _value: unknown, metadata: Metadata): void {
  if (key !== WORKSPACE_METADATA) return;
  const route = ctx?.oidc?.route;
  // Clients loaded from storage were checked when they were registered or updated.
  if (!ctx || (route !== 'registration' && route !== 'client_update')) return;

  if (route === 'registration') {
    const workspace = (ctx.state as RegistrationState).registrationWorkspace;
    if (workspace) metadata[WORKSPACE_METADATA] = workspace;
    else delete metadata[WORKSPACE_METADATA];
  } else {
    const existing = ctx.oidc.client && clientWorkspace(ctx.oidc.client);
    if (existing) metadata[WORKSPACE_METADATA] = existing;
    else delete metadata[WORKSPACE_METADATA];
  }

  const grantTypes = Array.isArray(metadata.grant_types) ? metadata.grant_types as unknown[] : [];
  if (grantTypes.includes('authorization_code') && !grantTypes.includes('refresh_token')) {
    metadata.grant_types = [...grantTypes, 'refresh_token'];
  }
  // A client without authorization_code has no use for response_type=code (the engine's default).
  if (!grantTypes.includes('authorization_code')) metadata.response_types = [];
  if (grantTypes.includes('client_credentials') && !metadata[WORKSPACE_METADATA]) {
    throw new errors.InvalidClientMetadata(
      'grant_types client_credentials is only for clients bound to a workspace: register with an initial access token created by a workspace admin (Authorization: Bearer <token>)',
    );
  }
  if (grantTypes.includes('client_credentials') && metadata.token_endpoint_auth_method === 'none') {
    throw new errors.InvalidClientMetadata('grant_types client_credentials needs a confidential client; token_endpoint_auth_method "none" cannot use it');
  }

  checkRedirectUris(metadata, (ctx.oidc.body as Metadata | undefined)?.application_type);
}

function checkRedirectUris(metadata: Metadata, requestedApplicationType: unknown): void {
  const uris = metadata.redirect_uris;
  if (uris === undefined) return;
  if (!Array.isArray(uris) || uris.some((uri) => typeof uri !== 'string')) {
    throw new errors.InvalidClientMetadata('redirect_uris must be an array of strings');
  }
  let privateUse = false;
  for (const uri of uris as string[]) {
    const url = URL.parse(uri);
    if (!url || !/^[a-z][a-z0-9+.-]*:/i.test(uri)) {
      throw new errors.InvalidClientMetadata(`redirect_uris must be absolute URIs; "${uri}" is not`);
    }
    if (uri.includes('#')) throw new errors.InvalidClientMetadata(`redirect_uris must not contain a fragment; remove "#..." from "${uri}"`);
    if (uri.includes('*')) throw new errors.InvalidClientMetadata(`redirect_uris must not contain wildcards; register every exact URI ("${uri}")`);
    if (url.protocol === 'http:' && !LOOPBACK.has(url.hostname)) {
      throw new errors.InvalidClientMetadata(`redirect_uris must use https; http is only allowed on loopback (127.0.0.1, [::1], localhost), got "${uri}"`);
    }
    if (!WEB_SCHEMES.has(url.protocol)) privateUse = true;
  }
  // RFC 8252 private-use schemes are for native apps; say so on the client's behalf when it did not
  // (the engine has already filled in its default, `web`, so the request body tells).
  if (privateUse && requestedApplicationType === undefined) metadata.application_type = 'native';
}

/**
 * Resolves the workspace of a registration request's initial access token (if it sent one),
 * before the engine handles the request, and marks the registration as one that uses the token
 * (counted when the client is stored: initial_access_tokens.ts). With open registration the token
 * is optional but, when present, must be valid: a bad, expired or used-up one is refused rather
 * than silently ignored.
 */
export function registrationWorkspace(provider: Provider): Middleware {
  return async (ctx, next) => {
    const authorization = ctx.get('authorization');
    const token = /^Bearer\s+(\S+)$/i.exec(authorization)?.[1];
    if (token) {
      const iat = await findInitialAccessToken(provider, token);
      if (!iat) {
        const description = 'initial access token is invalid, expired or used up';
        ctx.status = 401;
        ctx.set('WWW-Authenticate', `Bearer error="invalid_token", error_description="${description}"`);
        ctx.set('Cache-Control', 'no-store');
        ctx.body = { error: 'invalid_token', error_description: description };
        return;
      }
      if (iat.workspace) (ctx.state as RegistrationState).registrationWorkspace = iat.workspace;
      useOnRegistration(ctx.state, iat);
    }
    await next();
  };
}
