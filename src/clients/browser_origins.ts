import type { Client, KoaContextWithOIDC } from 'oidc-provider';

/**
 * Which page may call the token, revocation and introspection endpoints from a browser (CORS),
 * as a client: a page on the origin of one of the client's redirect URIs, whatever way the client
 * authenticates. The engine's own rule lets public clients alone, so a browser-based host (an MCP
 * host in a page) that registered itself and was given a secret could sign its user in and then not
 * read the token endpoint's answer. A page elsewhere gains nothing from being let in: the request
 * still needs the client's credentials, and no cookie goes with it. A sandboxed page (`null`) is
 * no origin to match.
 */
export function browserOriginAllowed(_ctx: KoaContextWithOIDC, origin: string, client: Client): boolean {
  if (origin === 'null') return false;
  return client.redirectUris?.some((uri) => URL.parse(uri)?.origin === origin) ?? false;
}
