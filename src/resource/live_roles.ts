import type { AccountStore, Role } from '../../adapters/store.ts';
import { PROPAGATION_BOUND_MS } from '../shared/propagation.ts';

const MAX_CACHED = 10_000;

/**
 * A user's current role in a workspace, read at most every PROPAGATION_BOUND_MS per user and
 * workspace. A token's `role` claim is the role when it was issued; the data API also asks this,
 * so a member removed or demoted loses access within the bound rather than when the token expires.
 */
export class LiveRoles {
  readonly #accounts: AccountStore;
  readonly #clock: () => number;
  readonly #roles = new Map<string, { role: Role | undefined; readAt: number }>();

  constructor(accounts: AccountStore, clock: () => number = Date.now) {
    this.#accounts = accounts;
    this.#clock = clock;
  }

  async roleOf(userId: string, workspaceId: string): Promise<Role | undefined> {
    const key = `${userId} ${workspaceId}`;
    const cached = this.#roles.get(key);
    const now = this.#clock();
    if (cached && now - cached.readAt < PROPAGATION_BOUND_MS) return cached.role;
    const role = (await this.#accounts.getMembership(userId, workspaceId))?.role;
    this.#roles.delete(key);
    if (this.#roles.size >= MAX_CACHED) this.#roles.delete(this.#roles.keys().next().value!);
    this.#roles.set(key, { role, readAt: now });
    return role;
  }
}
