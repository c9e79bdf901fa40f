import type { Provider } from 'oidc-provider';

import type { ModelStore, User, Workspace } from '../../adapters/store.ts';
import type { Accounts } from '../accounts/accounts.ts';
import { storeOperatorClient } from '../clients/operator_clients.ts';
import { WORKSPACE_METADATA } from '../clients/registration.ts';
import { QuickstartError } from './quickstart_error.ts';

/**
 * What the quickstart writes, all or nothing: the admin, the workspace, the membership, the demo
 * client (unless the service's settings would refuse it: no redirect URI is given then).
 * Everything that can be checked beforehand was (quickstart.ts); a write that still fails (the
 * store went away, the engine refused the client) takes back the ones before it, so a rerun starts
 * from a store without them rather than one where the email is taken.
 */

export const DEMO_CLIENT_NAME = 'Quickstart demo';

export interface NewAdmin {
  workspaceName: string;
  email: string;
  name: string;
  password: string;
}

export interface DemoClient {
  client_id: string;
  /** Shown once: only its hash is stored. */
  client_secret: string;
  client_name: string;
  grant_types: string[];
  redirect_uris: string[];
  token_endpoint_auth_method: 'client_secret_post';
  [WORKSPACE_METADATA]: string;
}

export interface Created {
  user: User;
  workspace: Workspace;
  /** Absent when none was asked for. */
  client?: DemoClient;
}

export interface Writers {
  accounts: Accounts;
  /** The engine, for the demo client (checked by its Client validation, stored through its adapter). */
  provider: Provider;
  /** The store's Client records: where a demo client written halfway would be found. */
  clients: ModelStore;
}

/** `redirectUri`: the demo client's; without one, no demo client is written. */
export async function createRecords(writers: Writers, admin: NewAdmin, redirectUri: string): Promise<Required<Created>>;
export async function createRecords(writers: Writers, admin: NewAdmin, redirectUri: undefined): Promise<Created>;
export async function createRecords({ accounts, provider, clients }: Writers, admin: NewAdmin, redirectUri: string | undefined): Promise<Created> {
  const undo: Array<{ what: string; run: () => Promise<unknown> }> = [];
  try {
    const user = await accounts.createUser({ email: admin.email, name: admin.name, password: admin.password });
    undo.push({ what: `user ${user.id} (${user.email})`, run: () => accounts.deleteUser(user.id) });
    const workspace = await accounts.createWorkspace(admin.workspaceName);
    // Its memberships go with it, and so does a client stored under it by a write that seemed to fail.
    undo.push({ what: `workspace ${workspace.id}`, run: () => deleteWorkspace(accounts, clients, workspace.id) });
    await accounts.addMember(user.id, workspace.id, 'admin');
    if (redirectUri === undefined) return { user, workspace };
    const client = await createDemoClient(provider, workspace.id, redirectUri);
    return { user, workspace, client };
  } catch (error) {
    if (undo.length === 0) throw error;
    const left = await undoAll(undo);
    const why = failure(error);
    if (left.length === 0) throw new QuickstartError(`${why}; what had been written was removed, so quickstart can run again`);
    throw new QuickstartError(`${why}; removing what had been written failed too, so these remain: ${left.join(', ')}; once the store answers, remove them (npm run admin -- workspace delete --workspace ID, user delete --email EMAIL) before running quickstart again`);
  }
}

/** What went wrong, in words: the engine's refusals say it in error_description. */
function failure(error: unknown): string {
  const { message, error_description: description } = error as Error & { error_description?: unknown };
  return typeof description === 'string' ? `${message}: ${description}` : message;
}

/** Runs the undo steps newest first; resolves what could not be removed. */
async function undoAll(undo: ReadonlyArray<{ what: string; run: () => Promise<unknown> }>): Promise<string[]> {
  const left: string[] = [];
  for (const step of undo.toReversed()) {
    await step.run().catch(() => left.push(step.what));
  }
  return left;
}

async function deleteWorkspace(accounts: Accounts, clients: ModelStore, workspaceId: string): Promise<void> {
  for (const { id } of await clients.listBy(workspaceId)) await clients.destroy(id);
  await accounts.deleteWorkspace(workspaceId);
}

/**
 * A confidential client bound to the workspace, as one registered with the workspace's initial
 * access token would be (so it may use client credentials, and an operator stands behind it), but
 * written directly: the quickstart needs no running service. Stored like a resource server
 * (storeOperatorClient), as a registered client is (secret hashed, listed under its workspace).
 * Registered as a web client (application_type web): its redirect URI, on loopback, matches
 * exactly, port included, and consent is remembered, as for an application in development.
 */
async function createDemoClient(provider: Provider, workspaceId: string, redirectUri: string): Promise<DemoClient> {
  const fields = {
    client_name: DEMO_CLIENT_NAME,
    grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
    redirect_uris: [redirectUri],
    token_endpoint_auth_method: 'client_secret_post' as const,
    [WORKSPACE_METADATA]: workspaceId,
  };
  const { client_id, client_secret } = await storeOperatorClient(provider, { ...fields, application_type: 'web', response_types: ['code'] });
  return { client_id, client_secret, ...fields };
}
