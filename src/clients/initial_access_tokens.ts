import { randomBytes } from 'node:crypto';

import Provider, { errors, type KoaContextWithOIDC } from 'oidc-provider';

import type { ModelStore } from '../../adapters/store.ts';
import { nowSeconds } from '../shared/clock.ts';

/**
 * Initial access tokens (RFC 7591 section 3), made by a workspace admin with the admin CLI. Each
 * allows a number of registrations (one unless the operator asks for more) and expires.
 *
 * - The value names its workspace (`<workspace id>.<secret>`), so the binding lives exactly as long
 *   as the token the engine stores; it is stored under its SHA-256 like every bearer secret.
 * - The record says how many registrations the token allows (`maxUses`); the store counts them
 *   (ModelStore.countUse), atomically, so registrations racing for the last use cannot both win.
 * - A use is counted when the registered client is about to be stored, after every check of its
 *   metadata has passed: a refused registration does not use the token up. The record is deleted
 *   with its last use, so from then on the token is unknown (401 invalid_token).
 */
export const MAX_USES_FIELD = 'maxUses';
/** The workspace the token registers clients for, also kept in the record so a workspace's tokens can be listed (LISTED_BY). */
export const WORKSPACE_FIELD = 'workspaceId';
/** Set when the operator made the token with `--fapi`: the clients it registers are FAPI 2.0 clients (src/clients/fapi.ts). */
export const FAPI_FIELD = 'fapi';

/** The most registrations one token may allow. */
export const MAX_INITIAL_ACCESS_TOKEN_USES = 10_000;

/** The engine keeps only the fields its models declare; the InitialAccessToken also keeps `maxUses`, `workspaceId` and `fapi`. */
export function countedInitialAccessTokens(provider: Provider): void {
  const model = provider.InitialAccessToken as unknown as { IN_PAYLOAD: readonly string[] };
  const added = [MAX_USES_FIELD, WORKSPACE_FIELD, FAPI_FIELD].filter((field) => !model.IN_PAYLOAD.includes(field));
  if (added.length) {
    Object.defineProperty(model, 'IN_PAYLOAD', { value: Object.freeze([...model.IN_PAYLOAD, ...added]), configurable: true });
  }
}

export interface CreatedInitialAccessToken {
  token: string;
  /** Seconds since the epoch. */
  expiresAt: number;
  uses: number;
}

export async function createInitialAccessToken(
  provider: Provider,
  workspaceId: string,
  { expiresIn, uses, fapi = false }: { expiresIn: number; uses: number; fapi?: boolean },
): Promise<CreatedInitialAccessToken> {
  const jti = `${workspaceId}.${randomBytes(32).toString('base64url')}`;
  const expiresAt = nowSeconds() + expiresIn;
  const token = await new provider.InitialAccessToken({
    jti, exp: expiresAt, [MAX_USES_FIELD]: uses, [WORKSPACE_FIELD]: workspaceId, ...(fapi ? { [FAPI_FIELD]: true } : {}),
  }).save();
  return { token, expiresAt, uses };
}

/** A live initial access token as a registration request presents it. */
export interface PresentedInitialAccessToken {
  token: string;
  /** The workspace its value names, if any. */
  workspace: string | undefined;
  /** How many registrations it allows in all. */
  maxUses: number;
  /** The clients it registers are FAPI 2.0 clients. */
  fapi: boolean;
}

/** The token, if it is live and not used up (a used-up one is deleted with its last use). */
export async function findInitialAccessToken(provider: Provider, token: string): Promise<PresentedInitialAccessToken | undefined> {
  const iat = await provider.InitialAccessToken.find(token);
  if (!iat) return undefined;
  const dot = token.lastIndexOf('.');
  const fapi = (iat as unknown as Record<string, unknown>)[FAPI_FIELD] === true;
  return { token, workspace: dot > 0 ? token.slice(0, dot) : undefined, maxUses: maxUses(iat), fapi };
}

/** Tokens made before uses were counted carry no limit: they allow one registration, as every token now does by default. */
function maxUses(iat: object): number {
  const value = (iat as Record<string, unknown>)[MAX_USES_FIELD];
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : 1;
}

/**
 * Called by the RegistrationAccessToken adapter once it has stored a registration's token, the
 * last of the registration's writes; `storeIdOf` names the initial access token's record in the
 * store (its digest: src/engine/records_at_rest.ts). Within a registration that presented an
 * initial access token (the engine's request context: Provider.ctx), counts the use; when the token
 * was used up meanwhile (a concurrent registration took the last use), the registration is
 * answered 401 invalid_token, and the registration endpoint removes what it stored. Counted last,
 * so that a registration that fails on the way (a store outage answered 503) has not used the
 * token up, and its retry is served.
 */
export function countInitialAccessTokenUse(models: ModelStore, storeIdOf: (token: string) => string): () => Promise<void> {
  return async () => {
    const ctx: KoaContextWithOIDC | undefined = Provider.ctx;
    // Left there by the host's check of the registration request (src/http/endpoints/registration.ts).
    const presented = ctx?.state.initialAccessTokenUse;
    if (!ctx || !presented || ctx.oidc?.route !== 'registration') return;
    // Counted once per request, whatever else the registration stores.
    delete ctx.state.initialAccessTokenUse;
    const id = storeIdOf(presented.token);
    const uses = await models.countUse(id, presented.maxUses);
    if (uses === 0) throw new errors.InvalidToken('initial access token is invalid, expired or used up');
    // The use is counted: a token that cannot be deleted now is used up all the same, and expires.
    if (uses >= presented.maxUses) await models.destroy(id).catch(() => undefined);
  };
}
