import { createLocalJWKSet, type JSONWebKeySet } from 'jose';

import type { ModuleContext } from '../context.ts';
import type { Exchange } from '../http/exchange_log.ts';
import { jsonObject, type HttpResponse } from '../http/http_client.ts';

/** OpenID Provider metadata as discovered; values unchecked (the discovery module checks them). */
export type ProviderMetadata = Record<string, unknown> & {
  issuer?: string;
  authorization_endpoint?: string;
  token_endpoint?: string;
  userinfo_endpoint?: string;
  jwks_uri?: string;
  registration_endpoint?: string;
};

export interface Provider {
  discoveryUrl: string;
  discoveryResponse: HttpResponse;
  /** The discovery exchange, the evidence for a failed check of the metadata. */
  discoveryExchange: Exchange | undefined;
  metadata: ProviderMetadata;
  jwks: JSONWebKeySet;
  /** The origin of the authorization endpoint: redirects within it are the OP's own. */
  origin: string;
}

export function discoveryUrl(issuer: string): string {
  return `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
}

/** The suite's GetDynamicServerConfiguration: the discovery document, parsed or the module stops. */
export async function fetchMetadata(ctx: ModuleContext): Promise<{ url: string; response: HttpResponse; exchange: Exchange | undefined; metadata: ProviderMetadata }> {
  const url = discoveryUrl(ctx.target.issuer);
  const response = await ctx.http.send({ url, headers: { accept: 'application/json' } });
  const exchange = ctx.log.last();
  const metadata = jsonObject(response);
  ctx.require(metadata !== undefined, `the discovery document at ${url} is not a JSON object (status ${response.status})`);
  return { url, response, exchange, metadata };
}

/** The suite's FetchServerKeys. */
export async function fetchJwks(ctx: ModuleContext, metadata: ProviderMetadata): Promise<JSONWebKeySet> {
  const jwksUri = metadata.jwks_uri;
  ctx.require(typeof jwksUri === 'string' && jwksUri !== '', "Didn't find jwks_uri in the server configuration");
  const response = await ctx.http.send({ url: jwksUri, headers: { accept: 'application/json, application/jwk-set+json' } });
  const jwks = jsonObject(response);
  ctx.require(jwks !== undefined, `Server JWKs set string is not JSON (${jwksUri} answered ${response.status})`);
  return jwks as unknown as JSONWebKeySet;
}

/** Discovery and keys, as every module's configure() fetches them. */
export async function discover(ctx: ModuleContext): Promise<Provider> {
  const { url, response, exchange, metadata } = await fetchMetadata(ctx);
  for (const key of ['authorization_endpoint', 'token_endpoint', 'issuer'] as const) {
    const value = metadata[key];
    ctx.require(typeof value === 'string' && URL.canParse(value), `Couldn't find required component ${key} (a URL) in the discovery document`, exchange);
  }
  const jwks = await fetchJwks(ctx, metadata);
  return { discoveryUrl: url, discoveryResponse: response, discoveryExchange: exchange, metadata, jwks, origin: new URL(metadata.authorization_endpoint!).origin };
}

/** A jose key resolver over the discovered keys, for signature checks. */
export function keyResolver(provider: Provider): ReturnType<typeof createLocalJWKSet> {
  return createLocalJWKSet(provider.jwks);
}

export function stringList(metadata: ProviderMetadata, key: string): string[] | undefined {
  const value = metadata[key];
  return Array.isArray(value) && value.every((item) => typeof item === 'string') ? value as string[] : undefined;
}
