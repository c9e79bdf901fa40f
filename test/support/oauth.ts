import { createHash, randomBytes } from 'node:crypto';

export const REDIRECT_URI = 'http://127.0.0.1:9/callback';

export interface RegisteredClient {
  client_id: string;
  client_secret?: string;
  client_name?: string;
  redirect_uris: string[];
  grant_types: string[];
  registration_client_uri: string;
  registration_access_token: string;
  [key: string]: unknown;
}

/**
 * POST /oauth/register with the specification's body (overridable); asserts nothing. The client
 * is a web app on loopback (application_type web): without it, a loopback redirect URI makes a
 * native client, which the server asks for consent on every authorization (RFC 8252 section 8.6).
 */
export async function register(issuer: string, metadata: Record<string, unknown> = {}, initialAccessToken?: string): Promise<Response> {
  return fetch(`${issuer}/oauth/register`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(initialAccessToken ? { authorization: `Bearer ${initialAccessToken}` } : {}),
    },
    body: JSON.stringify({
      client_name: 'Test App',
      application_type: 'web',
      redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'client_secret_post',
      ...metadata,
    }),
  });
}

export async function registerClient(issuer: string, metadata: Record<string, unknown> = {}, initialAccessToken?: string): Promise<RegisteredClient> {
  const response = await register(issuer, metadata, initialAccessToken);
  if (response.status !== 201) throw new Error(`registration failed ${response.status}: ${await response.text()}`);
  return response.json() as Promise<RegisteredClient>;
}

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export function authorizationUrl(issuer: string, params: Record<string, string>): string {
  const url = new URL(`${issuer}/oauth/authorize`);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  return url.href;
}

/** An RFC 7592 request to a client's registration_client_uri, with its registration access token (if any). */
export function management(uri: string, token: string | undefined, method = 'GET', body?: Record<string, unknown>): Promise<Response> {
  return fetch(uri, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
}

/** POST /oauth/token with a form body. */
export async function tokenRequest(issuer: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
  return postForm(`${issuer}/oauth/token`, form, headers);
}

/** POST with a form body (application/x-www-form-urlencoded). */
export function postForm(url: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(form).toString(),
  });
}

/** Drops undefined values, so an override can remove a parameter. */
export function definedOnly(values: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).filter((entry): entry is [string, string] => entry[1] !== undefined));
}

/** A registered client's credentials for client_secret_basic: the Authorization header, id and secret form-encoded (RFC 6749 2.3.1). */
export function basicCredentials(client: { client_id: string; client_secret?: string }): Record<string, string> {
  return { authorization: `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret ?? '')}`).toString('base64')}` };
}

/** A registered client's credentials for client_secret_post (form body). */
export function postCredentials(client: { client_id: string; client_secret?: string }): Record<string, string> {
  return definedOnly({ client_id: client.client_id, client_secret: client.client_secret });
}

export interface CodeRequest {
  /** The authorization URL to send the user agent to. */
  url: string;
  verifier: string;
  state: string;
  /** The request's parameters, as sent. */
  params: Record<string, string>;
}

/**
 * An authorization-code request with a fresh PKCE S256 pair and a fresh state: response_type code,
 * REDIRECT_URI, scope 'api profile'. An override of `undefined` leaves a parameter out.
 */
export function codeRequest(issuer: string, clientId: string, overrides: Record<string, string | undefined> = {}): CodeRequest {
  const { verifier, challenge } = pkcePair();
  const state = randomBytes(16).toString('base64url');
  const params = definedOnly({
    client_id: clientId,
    response_type: 'code',
    redirect_uri: REDIRECT_URI,
    scope: 'api profile',
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    ...overrides,
  });
  return { url: authorizationUrl(issuer, params), verifier, state: params.state ?? state, params };
}

/** A raw authorization_code redemption with client_secret_post credentials; an override of `undefined` leaves a parameter out. */
export async function exchangeCode(
  issuer: string,
  client: { client_id: string; client_secret?: string },
  code: string,
  verifier: string,
  overrides: Record<string, string | undefined> = {},
): Promise<Response> {
  return tokenRequest(issuer, definedOnly({
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT_URI,
    code_verifier: verifier,
    ...postCredentials(client),
    ...overrides,
  }));
}

/** POST /oauth/revoke (RFC 7009) of `token` by the client, with client_secret_post credentials; asserts nothing. */
export async function revokeToken(issuer: string, client: { client_id: string; client_secret?: string }, token: string): Promise<Response> {
  return fetch(`${issuer}/oauth/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token, ...postCredentials(client) }).toString(),
  });
}

/** POST /oauth/introspect with the given client credentials in the body; the parsed 200 body or throws. */
export async function introspect(issuer: string, credentials: Record<string, string>, token: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${issuer}/oauth/introspect`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token, ...credentials }).toString(),
  });
  if (response.status !== 200) throw new Error(`introspection status ${response.status}: ${await response.text()}`);
  return response.json() as Promise<Record<string, unknown>>;
}
