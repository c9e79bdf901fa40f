import type { KoaContextWithOIDC, Provider } from 'oidc-provider';

import type { ModelStore } from '../../adapters/store.ts';
import { boundedCache } from '../shared/bounded_cache.ts';
import { nowSeconds, secondsUntil, systemClock, type Clock } from '../shared/clock.ts';

/** Last use is recorded to this precision: a busy grant costs one store write a minute, not one per token. */
const LAST_USED_RESOLUTION_SECONDS = 60;
/** Grants whose last recorded use is remembered in process; the least recently used go first. */
const REMEMBERED_GRANTS = 10_000;

/**
 * When each grant was last used: the last time the token endpoint issued tokens for it (code
 * exchange or refresh), which the settings area shows as an application's last use. Kept per grant
 * beside the engine's models, expiring with the grant and removed with it (src/engine/adapter.ts).
 *
 * The token endpoint's speed matters (bench/), so a use is written at most once a minute per grant
 * and instance, in the background: a token response never waits for, or fails on, this record.
 */
export class GrantActivity {
  static readonly MODEL = 'GrantActivity';
  readonly #store: ModelStore;
  readonly #clock: Clock;
  /** When this instance last wrote each grant's use (seconds). */
  readonly #written = boundedCache<string, number>({ max: REMEMBERED_GRANTS });

  constructor(store: ModelStore, clock: Clock = systemClock) {
    this.#store = store;
    this.#clock = clock;
  }

  /** Records a use of the grant, which expires at `grantExpiresAt` (seconds), unless one was recorded within the minute. */
  async recordUse(grantId: string, grantExpiresAt: number): Promise<void> {
    const now = nowSeconds(this.#clock);
    const previous = this.#written.get(grantId);
    if (previous !== undefined && now - previous < LAST_USED_RESOLUTION_SECONDS) return;
    if (grantExpiresAt <= now) return;
    this.#written.set(grantId, now);
    await this.#store.upsert(grantId, { lastUsedAt: now }, secondsUntil(grantExpiresAt, this.#clock));
  }

  /** Seconds since the epoch, or undefined when the grant was never used (or is gone). */
  async lastUsedAt(grantId: string): Promise<number | undefined> {
    const record = await this.#store.find(grantId);
    return typeof record?.lastUsedAt === 'number' ? record.lastUsedAt : undefined;
  }

  async forget(grantId: string): Promise<void> {
    this.#written.delete(grantId);
    await this.#store.destroy(grantId);
  }
}

/** Records each successful token request that used a grant (authorization_code, refresh_token). */
export function recordGrantUse(provider: Provider, activity: GrantActivity, onError: (error: unknown) => void): void {
  provider.on('grant.success', (ctx: KoaContextWithOIDC) => {
    const grant = ctx.oidc.entities.Grant;
    if (grant?.jti && typeof grant.exp === 'number') activity.recordUse(grant.jti, grant.exp).catch(onError);
  });
}
