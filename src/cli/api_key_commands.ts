import type { ApiKeyRecord } from '../../adapters/store.ts';
import { DURATION_MAX_DAYS, parseDuration } from '../../config/duration.ts';
import { ApiKeyError, ApiKeyNameTaken, ApiKeys, hasApiKeyIdShape } from '../api_keys/api_keys.ts';
import { isoTime } from '../shared/clock.ts';
import { namedBack } from '../shared/named_back.ts';
import { UsageError, existingWorkspace, required, waitForPropagation, type Command } from './command.ts';

/** The admin CLI's `api-key` commands: a workspace's API keys for the data API. */

const create: Command = {
  name: 'api-key create',
  synopsis: '--workspace WORKSPACE_ID --name NAME [--expires-in 90d|12h|30m|SECONDS]',
  description: 'A key for the workspace\'s data API, never expiring unless --expires-in says when. Shown once; only its digest is stored.',
  options: ['workspace', 'name', 'expires-in'],
  async run({ store, accounts, options }) {
    const name = required(options, 'name');
    const workspaceId = await existingWorkspace(accounts, options);
    const given = options['expires-in'];
    const expiresIn = given === undefined ? undefined : parseDuration(given);
    if (given !== undefined && expiresIn === undefined) throw new UsageError(`--expires-in must be a duration such as 90d, 12h, 30m or a number of seconds, at most ${DURATION_MAX_DAYS}d`);
    const { key, record } = await new ApiKeys(store.apiKeys).create(workspaceId, name, expiresIn).catch((error: unknown) => {
      // The key of that name by its id, which api-key revoke takes.
      if (error instanceof ApiKeyNameTaken) {
        throw new ApiKeyError(`the workspace already has an active key named "${error.taken.name}" (${error.taken.id}): give this one another name, or revoke that one first`);
      }
      throw error;
    });
    const expiry = record.expiresAt === undefined ? 'never expires' : `expires ${isoTime(record.expiresAt)}`;
    return {
      text: `created API key ${record.id} "${record.name}" for ${workspaceId} (${expiry}); shown once, store it now:\n${key}`,
      json: { ...shownKey(record), key },
    };
  },
};

const list: Command = {
  name: 'api-key list',
  synopsis: '--workspace WORKSPACE_ID',
  description: 'The workspace\'s live keys, oldest first: their first characters, never the key.',
  options: ['workspace'],
  async run({ store, accounts, options }) {
    const workspaceId = await existingWorkspace(accounts, options);
    const keys = (await new ApiKeys(store.apiKeys).list(workspaceId)).map(shownKey);
    const lines = keys.map((k) => `${k.id}\t${k.hint}…\t${k.name}\tcreated ${k.created_at}\texpires ${k.expires_at ?? 'never'}\tlast used ${k.last_used_at ?? 'never'}`);
    return { text: lines.join('\n') || '(no API keys)', json: keys };
  },
};

const revoke: Command = {
  name: 'api-key revoke',
  synopsis: 'KEY_ID',
  description: 'Revokes the key: refused on every instance by the time the command returns.',
  options: [],
  arguments: 1,
  async run({ store, args: [keyId] }) {
    if (!keyId) throw new UsageError('name the key: api-key revoke KEY_ID');
    const revoked = await new ApiKeys(store.apiKeys).revoke(keyId);
    if (!revoked) throw new ApiKeyError(`no API key with ${namedBack('id', keyId, hasApiKeyIdShape(keyId))}`);
    // Instances keep a verified key this long.
    await waitForPropagation();
    return { text: `revoked API key ${keyId} ("${revoked.name}")`, json: { revoked: keyId } };
  },
};

export const API_KEY_COMMANDS: readonly Command[] = [create, list, revoke];

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
