import { randomBytes } from 'node:crypto';

import { codeRequest, exchangeCode, registerClient, tokenRequest, type RegisteredClient } from './oauth.ts';
import { initialAccessToken, seedUser, type SeededUser, type TestServer } from './server.ts';
import { UserAgent, authorize } from './user_agent.ts';

export interface ApiResponse<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
}

export interface ApiRequest {
  method?: string;
  /** An OAuth access token or an API key, sent as `Authorization: Bearer`. */
  credential?: string;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as given (malformed bodies, bytes that are not UTF-8), with `content-type` from `headers` or application/json. */
  raw?: string | Uint8Array;
  headers?: Record<string, string>;
}

/** One data API request; `path` is relative to the issuer (e.g. `/rest/companies`). */
export async function api<T = Record<string, unknown>>(server: TestServer, path: string, request: ApiRequest = {}): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...request.headers };
  if (request.credential) headers.authorization = `Bearer ${request.credential}`;
  let body: string | Uint8Array<ArrayBuffer> | undefined;
  if (request.json !== undefined || request.raw !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = typeof request.raw === 'object' ? new Uint8Array(request.raw) : request.raw ?? JSON.stringify(request.json);
  }
  const response = await fetch(`${server.issuer}${path}`, { method: request.method ?? (body ? 'POST' : 'GET'), headers, body });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: (text ? JSON.parse(text) : undefined) as T };
}

/** A user's access token through the real authorization code flow (login and consent over HTTP), for `resource` when given (RFC 8707). */
export async function userAccessToken(server: TestServer, client: RegisteredClient, user: SeededUser, scope = 'api', resource?: string): Promise<{ access_token: string; refresh_token?: string }> {
  const { url, verifier } = codeRequest(server.issuer, client.client_id, { scope, resource });
  const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
  const code = callback.searchParams.get('code');
  if (!code) throw new Error(`no code: ${callback.href}`);
  const response = await exchangeCode(server.issuer, client, code, verifier);
  if (response.status !== 200) throw new Error(`code exchange failed ${response.status}: ${await response.text()}`);
  return response.json() as Promise<{ access_token: string; refresh_token?: string }>;
}

/** A client bound to the workspace (registered with an initial access token) and its client-credentials token for `api`, for `resource` when given. */
export async function clientCredentialsToken(server: TestServer, workspaceId: string, resource?: string): Promise<{ client: RegisteredClient; access_token: string }> {
  const client = await registerClient(server.issuer, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, workspaceId));
  const response = await tokenRequest(server.issuer, {
    grant_type: 'client_credentials', scope: 'api', client_id: client.client_id, client_secret: client.client_secret!, ...(resource ? { resource } : {}),
  });
  if (response.status !== 200) throw new Error(`client_credentials failed ${response.status}: ${await response.text()}`);
  return { client, access_token: ((await response.json()) as { access_token: string }).access_token };
}

/** An API key for the workspace, made with the admin CLI as an operator would. */
export async function createApiKey(server: TestServer, workspaceId: string, options: { name?: string; expiresIn?: string } = {}): Promise<{ id: string; key: string; [field: string]: unknown }> {
  // A name of its own: two active keys of a workspace may not share one.
  const args = ['api-key', 'create', '--workspace', workspaceId, '--name', options.name ?? `test key ${randomBytes(4).toString('hex')}`, '--json'];
  if (options.expiresIn) args.push('--expires-in', options.expiresIn);
  const result = await server.admin(args);
  if (result.code !== 0) throw new Error(`api-key create failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as { id: string; key: string };
}

/** A user who belongs only to `workspaceId`, with `role`. */
export async function memberOf(server: TestServer, workspaceId: string, role: 'admin' | 'member' | 'viewer'): Promise<SeededUser> {
  const user = await seedUser(server, []);
  const result = await server.admin(['member', 'add', '--user', user.id, '--workspace', workspaceId, '--role', role]);
  if (result.code !== 0) throw new Error(`member add failed: ${result.stderr}`);
  return { ...user, workspaces: [{ id: workspaceId, name: '', role }] };
}
