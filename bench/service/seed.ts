import { randomBytes } from 'node:crypto';

import type { Accounts } from '../../src/accounts/accounts.ts';

/** How bench/service/memory_preload.ts reports what it seeded, on one stdout line. */
export const SEED_LINE_PREFIX = 'bench-seed ';

/** The user the bench signs in as, admin of its own workspace. */
export interface BenchUser {
  email: string;
  password: string;
  workspaceId: string;
}

/** What bench/service/memory_preload.ts reports besides the user: the initial access token and the workspace's API key (or why there is none). */
export interface MemorySeedExtras {
  initialAccessToken: string;
  apiKey?: string;
  apiKeyError?: string;
}

/** Creates a workspace and an admin in it through the service's own Accounts (as test/helpers' seedUser does). */
export async function seedUser(accounts: Accounts): Promise<BenchUser> {
  const email = `bench-${randomBytes(4).toString('hex')}@example.com`;
  const password = randomBytes(18).toString('base64url');
  const workspace = await accounts.createWorkspace('Bench');
  const user = await accounts.createUser({ email, name: 'Bench User', givenName: 'Bench', familyName: 'User', password });
  await accounts.addMember(user.id, workspace.id, 'admin');
  return { email, password, workspaceId: workspace.id };
}
