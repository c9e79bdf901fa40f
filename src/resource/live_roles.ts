import { ROLES, type AccountStore, type Role } from '../../adapters/store.ts';
import { boundedCache, type BoundedCache } from '../shared/bounded_cache.ts';
import { systemClock, type Clock } from '../shared/clock.ts';
import { PROPAGATION_BOUND_MS } from '../shared/propagation.ts';
import type { AccessTokenClaims } from '../tokens/verifier.ts';
import { lowerRole } from './principal.ts';

const MAX_CACHED = 10_000;

/**
 * A user's current role in a workspace, read at most every PROPAGATION_BOUND_MS per user and
 * workspace. A token's `role` claim is the role when it was issued; the data API also asks this,
 * so a member removed or demoted loses access within the bound rather than when the token expires.
 */
export class LiveRoles {
  readonly #accounts: AccountStore;
  /** A user no longer in the workspace is remembered too, as `none`. */
  readonly #roles: BoundedCache<string, Role | 'none'>;

  constructor(accounts: AccountStore, clock: Clock = systemClock) {
    this.#accounts = accounts;
    this.#roles = boundedCache<string, Role | 'none'>({ max: MAX_CACHED, ttlMs: PROPAGATION_BOUND_MS, clock });
  }

  /**
   * The role a user's token acts with now: the lower of the role it was issued with and the user's
   * role now (a demotion applies at once, a promotion with the next token). Undefined once the
   * user is no longer a member of the token's workspace.
   */
  async ofToken(claims: AccessTokenClaims): Promise<Role | undefined> {
    const issued = ROLES.includes(claims.role as Role) ? claims.role as Role : undefined;
    const current = await this.roleOf(claims.sub, claims.workspace_id);
    return issued && current ? lowerRole(issued, current) : undefined;
  }

  async roleOf(userId: string, workspaceId: string): Promise<Role | undefined> {
    const key = `${userId} ${workspaceId}`;
    const cached = this.#roles.get(key);
    if (cached !== undefined) return cached === 'none' ? undefined : cached;
    const role = (await this.#accounts.getMembership(userId, workspaceId))?.role;
    this.#roles.set(key, role ?? 'none');
    return role;
  }
}
