import type { Store, Workspace } from '../../adapters/store.ts';
import type { Accounts } from '../accounts/accounts.ts';
import { ApiKeys } from '../api_keys/api_keys.ts';
import { AccountError } from '../accounts/accounts.ts';
import { hasIdShape } from '../accounts/ids.ts';
import { UserAccess } from '../engine/user_access.ts';
import { OBJECTS } from '../resource/objects.ts';
import { isoTime } from '../shared/clock.ts';
import { namedBack } from '../shared/named_back.ts';
import { deleteClient } from './client_commands.ts';
import { required, waitForPropagation, type Command, type Output } from './command.ts';
import { invitationsOver } from '../settings/invitations.ts';
import { plural } from '../shared/words.ts';

/** The admin CLI's `workspace` commands. */

const create: Command = {
  name: 'workspace create',
  synopsis: '--name NAME',
  description: 'A new workspace; add its first admin with "user create" or "member add".',
  options: ['name'],
  async run({ accounts, options }) {
    const workspace = await accounts.createWorkspace(required(options, 'name'));
    return { text: `created workspace ${workspace.id} (${workspace.name})`, json: shownWorkspace(workspace) };
  },
};

const list: Command = {
  name: 'workspace list',
  synopsis: '',
  description: 'Every workspace, oldest first.',
  options: [],
  async run({ accounts }) {
    const workspaces = await accounts.listWorkspaces();
    return { text: workspaces.map((w) => `${w.id}\t${w.name}`).join('\n') || '(no workspaces)', json: workspaces.map(shownWorkspace) };
  },
};

const remove: Command = {
  name: 'workspace delete',
  synopsis: '--workspace WORKSPACE_ID',
  description: [
    'Deletes the workspace and everything bound to it: its memberships (its people keep their accounts and',
    'other workspaces), its clients, API keys, initial access tokens and invitation links, the grants given',
    'for it, and its data records. Every token and key of it is refused on every instance by the time the command returns.',
  ].join('\n'),
  options: ['workspace'],
  async run({ store, accounts, options, engine }) {
    const workspaceId = required(options, 'workspace');
    const workspace = await accounts.getWorkspace(workspaceId);
    const access = new UserAccess({ store, ...await engine() });
    if (!workspace) return deleteWhatIsLeft(store, accounts, access, workspaceId);
    const members = (await accounts.listMembers(workspaceId)).length;
    // What is bound to it goes first, so a failure leaves a workspace to delete again; and once
    // more after it, for what an admin made meanwhile.
    const before = await deleteBoundTo(store, accounts, access, workspaceId);
    await accounts.deleteWorkspace(workspaceId);
    const deleted = merge(before, await deleteBoundTo(store, accounts, access, workspaceId));
    await waitForPropagation();
    return {
      text: `deleted workspace ${workspaceId} (${workspace.name}): ${plural(members, 'membership')} (its people keep their accounts), `
        + `${inWords(deleted)}; their tokens and keys are refused from now`,
      json: { deleted: workspaceId, name: workspace.name, memberships_ended: members, ...shownDeleted(deleted) },
    };
  },
};

export const WORKSPACE_COMMANDS: readonly Command[] = [create, list, remove];

function shownWorkspace(workspace: Workspace) {
  return { id: workspace.id, name: workspace.name, created_at: isoTime(workspace.createdAt) };
}

interface Deleted {
  clients: string[];
  apiKeys: string[];
  initialAccessTokens: number;
  /** The settings area's invitation links to it, pending or being accepted. */
  invitations: number;
  grants: number;
  /** Per object type (`companies`, `people`). */
  records: Record<string, number>;
}

/**
 * Everything bound to the workspace besides its memberships: no client registers with its tokens
 * any more, its clients' tokens and its grants' are refused through the revocation list, its keys
 * are deleted (refused once instances forget them, within the propagation bound).
 */
async function deleteBoundTo(store: Store, accounts: Accounts, access: UserAccess, workspaceId: string): Promise<Deleted> {
  const tokens = store.model('InitialAccessToken');
  const initialAccessTokens = await tokens.listBy(workspaceId);
  for (const { id } of initialAccessTokens) await tokens.destroy(id);
  const clients = (await store.model('Client').listBy(workspaceId)).map(({ id }) => id);
  for (const clientId of clients) await deleteClient(store, clientId);
  const apiKeys = new ApiKeys(store.apiKeys);
  const keys = (await apiKeys.list(workspaceId)).map(({ id }) => id);
  for (const keyId of keys) await apiKeys.revoke(keyId);
  const invitations = await invitationsOver(store, accounts).deleteAllOf(workspaceId);
  const grants = await access.revokeWorkspaceGrants(workspaceId);
  const records: Record<string, number> = {};
  for (const { namePlural } of OBJECTS) records[namePlural] = await store.records.deleteAll(workspaceId, namePlural);
  return { clients, apiKeys: keys, initialAccessTokens: initialAccessTokens.length, invitations, grants, records };
}

/**
 * A deletion cut short once the workspace itself had gone (the store failing in the second pass)
 * is run again by the same command: what is still bound to the workspace goes now. Nothing left
 * is what a workspace that never existed has too.
 */
async function deleteWhatIsLeft(store: Store, accounts: Accounts, access: UserAccess, workspaceId: string): Promise<Output> {
  const left = await deleteBoundTo(store, accounts, access, workspaceId);
  if (!left.clients.length && !left.apiKeys.length && !left.initialAccessTokens && !left.invitations && !left.grants && !recordCount(left)) {
    throw new AccountError(`no workspace with ${namedBack('id', workspaceId, hasIdShape('ws', workspaceId))}`);
  }
  await waitForPropagation();
  return {
    text: `workspace ${workspaceId} was deleted already; deleted what was left bound to it: ${inWords(left)}`,
    json: { deleted: workspaceId, ...shownDeleted(left) },
  };
}

function recordCount(deleted: Deleted): number {
  return Object.values(deleted.records).reduce((sum, count) => sum + count, 0);
}

function inWords(deleted: Deleted): string {
  return `${plural(deleted.clients.length, 'client')}, ${plural(deleted.apiKeys.length, 'API key')}, ${plural(deleted.initialAccessTokens, 'initial access token')}, `
    + `${plural(deleted.invitations, 'invitation link')}, ${plural(deleted.grants, 'grant')}, ${plural(recordCount(deleted), 'data record')}`;
}

function shownDeleted(deleted: Deleted) {
  return {
    clients_deleted: deleted.clients,
    api_keys_revoked: deleted.apiKeys,
    initial_access_tokens_deleted: deleted.initialAccessTokens,
    invitations_deleted: deleted.invitations,
    grants_revoked: deleted.grants,
    records_deleted: deleted.records,
  };
}

function merge(first: Deleted, second: Deleted): Deleted {
  return {
    clients: [...first.clients, ...second.clients],
    apiKeys: [...first.apiKeys, ...second.apiKeys],
    initialAccessTokens: first.initialAccessTokens + second.initialAccessTokens,
    invitations: first.invitations + second.invitations,
    grants: first.grants + second.grants,
    records: Object.fromEntries(Object.entries(first.records).map(([object, count]) => [object, count + (second.records[object] ?? 0)])),
  };
}
