import { setTimeout as sleep } from 'node:timers/promises';

import type { Store } from '../../adapters/store.ts';
import { ResourceError, type ProtectedResources } from '../clients/protected_resources.ts';
import {
  createResourceServer, INTROSPECTION_AUDIENCE, RESOURCE_SERVER_AUTH_METHODS, isResourceServerAuthMethod, type ResourceServerAuthMethod,
} from '../clients/resource_servers.ts';
import type { OAuthServer } from '../engine/provider.ts';
import { OAUTH_DISCOVERY_PATH } from '../engine/routes.ts';
import type { KeyMaterial } from '../keys/keys.ts';
import { namedBack } from '../shared/named_back.ts';
import { isoTime, nowSeconds, systemClock } from '../shared/clock.ts';
import { revocationEntries } from '../tokens/revocation_list.ts';
import { UsageError, required, waitForPropagation, type Command, type Output } from './command.ts';
import { probeService } from './quickstart_service.ts';

/**
 * The admin CLI's `resource-server` commands: the APIs this server issues tokens for (RFC 8707),
 * each with the credentials of a client that may introspect the tokens meant for it.
 */

export interface CreateRequest {
  name: string;
  /** The API's canonical URI; the data API when absent (credentials to introspect its tokens). */
  resource: string | undefined;
  scopes: string[];
  authMethod: ResourceServerAuthMethod;
  /** The API accepts DPoP-bound access tokens only. */
  dpopRequired?: boolean;
}

/**
 * `resource-server create`: registers the API (unless it is the data API, served here), then a
 * confidential client that may introspect its tokens, whose secret is shown this once.
 */
export async function createResourceServerCommand(engine: OAuthServer & { keys: KeyMaterial }, request: CreateRequest): Promise<Output> {
  const api = request.resource === engine.audience ? undefined : request.resource;
  if (api === undefined && (request.scopes.length > 0 || request.dpopRequired)) {
    throw new UsageError('--scope and --require-dpop describe an API registered with --resource; the data API\'s scopes are its own, and DPOP_REQUIRED sets whether its tokens are DPoP-bound');
  }
  const registered = api === undefined
    ? undefined
    : await engine.resources.register({ resource: api, name: request.name, scopes: request.scopes, dpopRequired: request.dpopRequired === true });
  const resource = registered?.resource ?? engine.audience;
  const scopes = registered?.scopes ?? (await engine.resources.find(resource))!.scopes;
  let created;
  try {
    created = await createResourceServer(engine.provider, request.name, resource, request.authMethod);
  } catch (error) {
    // Nothing half-made: an API is registered with its credentials, or not at all.
    if (registered) await engine.resources.remove(registered.resource);
    throw error;
  }
  const dpopOnly = registered?.dpopRequired ? ' and DPoP-bound tokens only' : '';
  const registeredApi = registered ? `registered ${resource} (${request.name}), which accepts ${scopes.join(' ')}${dpopOnly}; ` : '';
  const warning = registered ? undefined : await dataApiWarning(engine);
  return {
    text: `${registeredApi}created resource server ${created.client_id} for ${resource}: it may introspect the access tokens for it, authenticating with ${request.authMethod}; `
      + `client secret shown once, store it now:\n${created.client_secret}${warning ? `\nwarning: ${warning}` : ''}`,
    json: { ...created, resource, scopes, dpop_required: registered?.dpopRequired ?? false, ...(warning ? { warning } : {}) },
  };
}

/**
 * The data API's URI comes from BASE_URL (or PORT) as this command reads them: run without the
 * service's settings, it names another than the service's, and every token the service issues
 * would be introspected as inactive. The service is asked whether it runs at that URL on this
 * store; a warning says what to do when it does not (the service may also just be stopped).
 */
async function dataApiWarning(engine: OAuthServer & { keys: KeyMaterial }): Promise<string | undefined> {
  const issuer = engine.provider.issuer;
  const service = await probeService(issuer, engine.keys.jwks.keys);
  const found = service.answers === 'another store' ? `the service at ${issuer} runs on another store`
    : service.answers === 'not the service' ? `${service.why} (or not from here)`
      : await anotherIssuer(issuer);
  if (!found) return undefined;
  return `${found}. These credentials are for ${engine.audience}, the data API at BASE_URL as this command read it: `
    + 'if the service runs with another PORT or BASE_URL, delete this resource server and run the command with the service\'s settings.';
}

/** The service answering at `issuer` under another name (its BASE_URL is another): says so; undefined when it is the same. */
async function anotherIssuer(issuer: string): Promise<string | undefined> {
  const metadata = await fetch(`${issuer}${OAUTH_DISCOVERY_PATH}`, { redirect: 'manual', signal: AbortSignal.timeout(5000) })
    .then((response) => response.json() as Promise<{ issuer?: unknown }>, () => undefined).catch(() => undefined);
  const named = metadata?.issuer;
  return typeof named === 'string' && named !== issuer ? `the service reached at ${issuer} is ${named} (its BASE_URL)` : undefined;
}

/** `resource-server list`: every API tokens are issued for, and the clients that may introspect its tokens. */
export async function listResourceServers(store: Store, resources: ProtectedResources): Promise<Output> {
  const clients = (await store.model('Client').list()).map(({ payload }) => payload).filter((payload) => typeof payload[INTROSPECTION_AUDIENCE] === 'string');
  const listed = (await resources.all()).map((api) => ({
    resource: api.resource,
    name: api.name,
    scopes: api.scopes,
    built_in: api.builtIn,
    dpop_required: api.dpopRequired,
    created_at: api.createdAt === undefined ? null : isoTime(api.createdAt),
    introspection_clients: clients.filter((client) => client[INTROSPECTION_AUDIENCE] === api.resource).map((client) => String(client.client_id)),
  }));
  const lines = listed.map((api) => `${api.resource}\t${api.name}\t${api.scopes.join(' ')}\t${api.built_in ? 'served here' : `registered ${api.created_at}`}\t${api.introspection_clients.join(',') || '-'}`);
  return { text: lines.join('\n'), json: listed };
}

/**
 * `resource-server delete URI`: the API is no longer one this server issues tokens for, its
 * introspection clients go, and every token already issued for it is refused (by introspection
 * and this server's checks) on every instance by the time the command returns.
 */
export async function deleteResourceServer(store: Store, resources: ProtectedResources, resource: string): Promise<Output | undefined> {
  const found = await resources.find(resource);
  if (!found || found.builtIn) return undefined;
  const now = nowSeconds();
  const revoked = revocationEntries.removedResource(found.resource, now);
  await store.revocations.add(revoked);
  // Its introspection clients before the API, so a deletion cut short leaves the API to delete again
  // rather than clients that would introspect an API registered again under the URI.
  const clients = store.model('Client');
  const introspecting = (await clients.list()).filter(({ payload }) => payload[INTROSPECTION_AUDIENCE] === found.resource);
  for (const { id } of introspecting) {
    await clients.destroy(id);
    await store.revocations.add(revocationEntries.deletedClient(id, now));
  }
  const removed = await resources.remove(found.resource);
  if (!removed) return undefined;
  await waitForPropagation();
  // From here on, a token for the URI is one for an API registered again under it, and is not refused.
  await sleep(Math.max(0, revoked.issuedBefore * 1000 - systemClock()));
  return {
    text: `deleted ${removed.resource} (${removed.name})${introspecting.length ? ` and its resource server ${introspecting.map(({ id }) => id).join(', ')}` : ''}; its tokens are refused from now`,
    json: { deleted: removed.resource, introspection_clients: introspecting.map(({ id }) => id) },
  };
}

export const RESOURCE_SERVER_COMMANDS: readonly Command[] = [
  {
    name: 'resource-server create',
    synopsis: `--name NAME [--resource URI] [--scope api|profile ...]\n[--auth-method ${RESOURCE_SERVER_AUTH_METHODS.join('|')}] [--require-dpop]`,
    description: 'Registers the API at --resource (RFC 8707; without it, credentials for the data API), and a\n'
      + 'confidential client that may introspect the access tokens for it. Its secret is shown once.\n'
      + 'With --require-dpop, its tokens are issued DPoP-bound only (RFC 9449), so the API can refuse plain bearer tokens.',
    options: ['name', 'resource', 'scope', 'auth-method', 'require-dpop'],
    async run({ options, engine }) {
      const name = required(options, 'name');
      const authMethod = options['auth-method'] ?? 'client_secret_basic';
      if (!isResourceServerAuthMethod(authMethod)) throw new UsageError(`--auth-method must be one of ${RESOURCE_SERVER_AUTH_METHODS.join(', ')}`);
      const scopes = (options.scope ?? []).flatMap((value) => value.split(/[\s,]+/)).filter(Boolean);
      return createResourceServerCommand(await engine(), { name, resource: options.resource, scopes, authMethod, dpopRequired: options['require-dpop'] === true });
    },
  },
  {
    name: 'resource-server list',
    synopsis: '',
    description: 'Every API tokens are issued for, and the clients that may introspect its tokens.',
    options: [],
    async run({ store, engine }) {
      return listResourceServers(store, (await engine()).resources);
    },
  },
  {
    name: 'resource-server delete',
    synopsis: 'RESOURCE_URI',
    description: 'Stops issuing tokens for the API and deletes its resource servers; the tokens already issued for it\n'
      + 'are refused on every instance by the time the command returns.',
    options: [],
    arguments: 1,
    async run({ store, engine, args: [resource] }) {
      if (!resource) throw new UsageError('name the API: resource-server delete RESOURCE_URI');
      const deleted = await deleteResourceServer(store, (await engine()).resources, resource);
      if (!deleted) throw new ResourceError(`no API registered as ${namedBack('URI', resource, URL.canParse(resource))} (the data API and /mcp are served here and cannot be deleted)`);
      return deleted;
    },
  },
];
