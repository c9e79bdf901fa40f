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

/** POST /oauth/register with the specification's body (overridable); asserts nothing. */
export async function register(issuer: string, metadata: Record<string, unknown> = {}, initialAccessToken?: string): Promise<Response> {
  return fetch(`${issuer}/oauth/register`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(initialAccessToken ? { authorization: `Bearer ${initialAccessToken}` } : {}),
    },
    body: JSON.stringify({
      client_name: 'Test App',
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

/** POST /oauth/token with a form body. */
export async function tokenRequest(issuer: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${issuer}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(form).toString(),
  });
}
