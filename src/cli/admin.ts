import { text } from 'node:stream/consumers';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { openStore } from '../../adapters/index.ts';
import type { ApiKeyRecord, Store } from '../../adapters/store.ts';
import { AccountError, Accounts } from '../accounts/accounts.ts';
import { ConfigError, loadConfig } from '../../config/index.ts';
import { createLogger } from '../shared/logger.ts';
import { loadKeyRing } from '../keys/key_encryption.ts';
import { loadKeys } from '../keys/keys.ts';
import { isoTime, nowSeconds } from '../shared/clock.ts';
import { KeyAdminError, listSigningKeys, rotateSigningKeys, type Output } from './key_commands.ts';
import { PROPAGATION_BOUND_MS } from '../shared/propagation.ts';
import { RevocationList, revocationEntries } from '../tokens/revocation_list.ts';
import { LIFETIMES } from '../../config/lifetimes.ts';
import { buildProvider } from '../engine/provider.ts';
import { MAX_INITIAL_ACCESS_TOKEN_USES, createInitialAccessToken } from '../clients/initial_access_tokens.ts';
import { WORKSPACE_METADATA } from '../clients/registration.ts';
import { ResourceError } from '../clients/protected_resources.ts';
import { INTROSPECTION_AUDIENCE, RESOURCE_SERVER_AUTH_METHODS, isResourceServerAuthMethod } from '../clients/resource_servers.ts';
import { ApiKeyError, ApiKeys } from '../api_keys/api_keys.ts';
import { parseDuration } from '../../config/duration.ts';
import { quickstart } from './quickstart.ts';
import { createResourceServerCommand, deleteResourceServer, listResourceServers } from './resource_server_commands.ts';

const USAGE = `Usage: npm run admin -- <command> [options] [--json]

  quickstart  first run: a workspace, its admin and a demo client, with the flow to try it
              (on a terminal it asks; otherwise --email EMAIL --name NAME --password-stdin)
              [--workspace-name NAME] [--base-url URL] [--force: even if users exist]
  workspace create --name NAME
  workspace list
  user create --email EMAIL --name NAME --workspace WORKSPACE_ID --role admin|member|viewer --password-stdin
              [--given-name NAME] [--family-name NAME]
  member add --user USER_ID --workspace WORKSPACE_ID --role admin|member|viewer
  iat create --workspace WORKSPACE_ID [--uses N] [--expires-in 24h|30m|7d|SECONDS]
  client list
  client delete CLIENT_ID
  resource-server create --name NAME [--resource URI] [--scope api|profile ...]
              [--auth-method client_secret_basic|client_secret_post]
  resource-server list
  resource-server delete RESOURCE_URI
  api-key create --workspace WORKSPACE_ID --name NAME [--expires-in 90d|12h|SECONDS]
  api-key list --workspace WORKSPACE_ID
  api-key revoke KEY_ID
  keys rotate [--now]
  keys list

Uses the same STORE (and other settings) as the service.`;

/** A mistake in how the command was called; printed with the usage. */
class UsageError extends Error {
  override name = 'UsageError';
}

const OPTIONS = {
  name: { type: 'string' },
  email: { type: 'string' },
  workspace: { type: 'string' },
  user: { type: 'string' },
  role: { type: 'string' },
  'given-name': { type: 'string' },
  'family-name': { type: 'string' },
  'password-stdin': { type: 'boolean' },
  'expires-in': { type: 'string' },
  uses: { type: 'string' },
  'auth-method': { type: 'string' },
  resource: { type: 'string' },
  scope: { type: 'string', multiple: true },
  now: { type: 'boolean' },
  'workspace-name': { type: 'string' },
  'base-url': { type: 'string' },
  force: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Options = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

interface Context {
  store: Store;
  accounts: Accounts;
  options: Options;
}

type Command = (ctx: Context, args: string[]) => Promise<Output>;

const COMMANDS: Record<string, Command> = {
  'workspace create': async ({ accounts, options }) => {
    const workspace = await accounts.createWorkspace(required(options, 'name'));
    return { text: `created workspace ${workspace.id} (${workspace.name})`, json: workspace };
  },
  'workspace list': async ({ accounts }) => {
    const workspaces = await accounts.listWorkspaces();
    return { text: workspaces.map((w) => `${w.id}\t${w.name}`).join('\n') || '(no workspaces)', json: workspaces };
  },
  'user create': async ({ accounts, options }) => {
    const workspaceId = required(options, 'workspace');
    const role = required(options, 'role');
    if (!options['password-stdin']) throw new UsageError('give the password on standard input with --password-stdin (never as an argument)');
    const email = required(options, 'email');
    const name = required(options, 'name');
    const password = (await text(process.stdin)).replace(/\r?\n$/, '');
    const { user, membership } = await accounts.createMember({
      email,
      name,
      password,
      ...(options['given-name'] ? { givenName: options['given-name'] } : {}),
      ...(options['family-name'] ? { familyName: options['family-name'] } : {}),
    }, workspaceId, role);
    const shown = { id: user.id, email: user.email, name: user.name, workspace_id: workspaceId, role: membership.role };
    return { text: `created user ${user.id} (${user.email}), ${membership.role} of ${workspaceId}`, json: shown };
  },
  'member add': async ({ accounts, options }) => {
    const membership = await accounts.addMember(required(options, 'user'), required(options, 'workspace'), required(options, 'role'));
    return { text: `${membership.userId} is now ${membership.role} of ${membership.workspaceId}`, json: membership };
  },
  'iat create': async ({ store, accounts, options }) => {
    const workspaceId = await existingWorkspace(accounts, options);
    const given = options['expires-in'];
    const expiresIn = given === undefined ? LIFETIMES.InitialAccessToken : parseDuration(given);
    if (expiresIn === undefined) throw new UsageError('--expires-in must be a duration such as 24h, 30m, 7d or a number of seconds');
    const uses = options.uses === undefined ? 1 : Number(options.uses);
    if (!/^\d+$/.test(options.uses ?? '1') || uses < 1 || uses > MAX_INITIAL_ACCESS_TOKEN_USES) {
      throw new UsageError(`--uses must be a whole number from 1 to ${MAX_INITIAL_ACCESS_TOKEN_USES}: how many clients the token may register`);
    }
    const { provider } = await engine(store, accounts);
    const created = await createInitialAccessToken(provider, workspaceId, { expiresIn, uses });
    const allows = uses === 1 ? 'registers one client' : `registers up to ${uses} clients`;
    return {
      text: `initial access token for ${workspaceId}: ${allows}, expires ${isoTime(created.expiresAt)}; shown once:\n${created.token}`,
      json: {
        initial_access_token: created.token, workspace_id: workspaceId, uses, expires_in: expiresIn, expires_at: isoTime(created.expiresAt),
      },
    };
  },
  'client list': async ({ store }) => {
    const clients = (await store.model('Client').list()).map(({ payload }) => ({
      client_id: payload.client_id,
      client_name: payload.client_name,
      grant_types: payload.grant_types,
      redirect_uris: payload.redirect_uris,
      token_endpoint_auth_method: payload.token_endpoint_auth_method,
      [WORKSPACE_METADATA]: payload[WORKSPACE_METADATA],
      [INTROSPECTION_AUDIENCE]: payload[INTROSPECTION_AUDIENCE],
    }));
    const lines = clients.map((c) => `${String(c.client_id)}\t${String(c.client_name ?? '')}\t${(c.grant_types as string[] | undefined)?.join(',') ?? ''}`);
    return { text: lines.join('\n') || '(no clients)', json: clients };
  },
  'client delete': async ({ store }, [clientId]) => {
    if (!clientId) throw new UsageError('name the client: client delete CLIENT_ID');
    const clients = store.model('Client');
    if (!await clients.find(clientId)) throw new AccountError(`no client with id ${clientId}`);
    await clients.destroy(clientId);
    // Its access tokens are never stored: the revocation list refuses them on every instance.
    await store.revocations.add(revocationEntries.deletedClient(clientId, nowSeconds()));
    // "Deleted" means every running instance refuses it (a little over the bound: timers may fire early).
    await sleep(PROPAGATION_BOUND_MS + 50);
    return { text: `deleted client ${clientId}`, json: { deleted: clientId } };
  },
  'resource-server create': async ({ store, accounts, options }) => {
    const name = required(options, 'name');
    const authMethod = options['auth-method'] ?? 'client_secret_basic';
    if (!isResourceServerAuthMethod(authMethod)) throw new UsageError(`--auth-method must be one of ${RESOURCE_SERVER_AUTH_METHODS.join(', ')}`);
    const scopes = (options.scope ?? []).flatMap((value) => value.split(/[\s,]+/)).filter(Boolean);
    return createResourceServerCommand(await engine(store, accounts), { name, resource: options.resource, scopes, authMethod });
  },
  'resource-server list': async ({ store, accounts }) => {
    const { resources } = await engine(store, accounts);
    return listResourceServers(store, resources);
  },
  'resource-server delete': async ({ store, accounts }, [resource]) => {
    if (!resource) throw new UsageError('name the API: resource-server delete RESOURCE_URI');
    const { resources } = await engine(store, accounts);
    const deleted = await deleteResourceServer(store, resources, resource);
    if (!deleted) throw new AccountError(`no API registered as ${resource} (the data API and /mcp are served here and cannot be deleted)`);
    return deleted;
  },
  'api-key create': async ({ store, accounts, options }) => {
    const name = required(options, 'name');
    const workspaceId = await existingWorkspace(accounts, options);
    const given = options['expires-in'];
    const expiresIn = given === undefined ? undefined : parseDuration(given);
    if (given !== undefined && expiresIn === undefined) throw new UsageError('--expires-in must be a duration such as 90d, 12h, 30m or a number of seconds');
    const { key, record } = await new ApiKeys(store.apiKeys).create(workspaceId, name, expiresIn);
    const expiry = record.expiresAt === undefined ? 'never expires' : `expires ${isoTime(record.expiresAt)}`;
    return {
      text: `created API key ${record.id} "${record.name}" for ${workspaceId} (${expiry}); shown once, store it now:\n${key}`,
      json: { ...shownKey(record), key },
    };
  },
  'api-key list': async ({ store, accounts, options }) => {
    const workspaceId = await existingWorkspace(accounts, options);
    const keys = (await new ApiKeys(store.apiKeys).list(workspaceId)).map(shownKey);
    const lines = keys.map((k) => `${k.id}\t${k.hint}…\t${k.name}\tcreated ${k.created_at}\texpires ${k.expires_at ?? 'never'}\tlast used ${k.last_used_at ?? 'never'}`);
    return { text: lines.join('\n') || '(no API keys)', json: keys };
  },
  'api-key revoke': async ({ store }, [keyId]) => {
    if (!keyId) throw new UsageError('name the key: api-key revoke KEY_ID');
    const revoked = await new ApiKeys(store.apiKeys).revoke(keyId);
    if (!revoked) throw new AccountError(`no API key with id ${keyId}`);
    // "Revoked" means every running instance refuses it: instances keep a verified key this long.
    await sleep(PROPAGATION_BOUND_MS + 50);
    return { text: `revoked API key ${keyId} ("${revoked.name}")`, json: { revoked: keyId } };
  },
  'keys rotate': ({ store, options }) => rotateSigningKeys(store, loadConfig(), createLogger('error'), options.now === true),
  'keys list': ({ store }) => listSigningKeys(store, loadConfig(), createLogger('error')),
  quickstart: (ctx) => quickstart({
    ...ctx, issuer: loadConfig().issuer, engine: () => engine(ctx.store, ctx.accounts), usage: (message) => new UsageError(message),
  }),
};

/** What the CLI shows of a key: never its digest. */
function shownKey(key: ApiKeyRecord) {
  return {
    id: key.id,
    name: key.name,
    workspace_id: key.workspaceId,
    hint: key.hint,
    created_at: isoTime(key.createdAt),
    expires_at: key.expiresAt === undefined ? null : isoTime(key.expiresAt),
    last_used_at: key.lastUsedAt === undefined ? null : isoTime(key.lastUsedAt),
  };
}

/** The id given with --workspace, once it is known to name a workspace. */
async function existingWorkspace(accounts: Accounts, options: Options): Promise<string> {
  const workspaceId = required(options, 'workspace');
  if (!await accounts.getWorkspace(workspaceId)) throw new AccountError(`no workspace with id ${workspaceId}`);
  return workspaceId;
}

function required(options: Options, name: 'name' | 'email' | 'workspace' | 'user' | 'role'): string {
  const value = options[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

/** The engine, configured as the service configures it, for the models only it can write. */
async function engine(store: Store, accounts: Accounts) {
  const config = loadConfig();
  const keys = await loadKeys(store.settings, await loadKeyRing(config, createLogger('error')), config.jwksFile);
  // Not started: the CLI only creates records, it never verifies a token.
  const revocations = new RevocationList(store.revocations);
  return buildProvider({ config, store, accounts, keys, revocations });
}

async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const { values: options, positionals } = parsed;
  const [noun, verb, ...args] = positionals;
  const command = COMMANDS[`${noun} ${verb}`] ?? (verb === undefined ? COMMANDS[noun ?? ''] : undefined);
  if (options.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (!command) {
    const given = positionals.join(' ');
    process.stderr.write(`error: ${given ? `unknown command "${given}"` : 'no command given'}\n\n${USAGE}\n`);
    return 2;
  }

  const config = loadConfig();
  const store = openStore(config.store, config.durability);
  try {
    const output = await command({ store, accounts: new Accounts(store.accounts), options }, args);
    process.stdout.write(`${options.json ? JSON.stringify(output.json, null, 2) : output.text}\n`);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`error: ${error.message}\n\n${USAGE}\n`);
      return 2;
    }
    if (error instanceof AccountError || error instanceof ApiKeyError || error instanceof KeyAdminError || error instanceof ResourceError) {
      process.stderr.write(`error: ${error.message}\n`);
      return 1;
    }
    throw error;
  } finally {
    await store.close();
  }
}

run(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
}, (error: unknown) => {
  const message = error instanceof ConfigError ? `configuration error: ${error.message}` : `error: ${(error as Error).message}`;
  createLogger('error').error('admin command failed', { error: (error as Error).name });
  process.stderr.write(`${message}\n`);
  process.exitCode = 1;
});
