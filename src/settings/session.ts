import type { Context } from 'koa';
import type { Provider } from 'oidc-provider';

import type { User } from '../../adapters/store.ts';
import type { Accounts } from '../accounts/accounts.ts';

/** Who is signed in to the settings area, as the engine's session says. */
export interface SignedIn {
  user: User;
  /** The engine's session id (the `_session` cookie's value): the session a password change keeps. Never rendered. */
  sessionId: string;
  /**
   * The engine's session's lasting id, which forms are bound to (csrf): the id above changes at
   * every authorization the browser finishes (the engine renews it), this one only with a new
   * session (a sign-out, another account). Never rendered.
   */
  sessionUid: string;
}

/**
 * The user the browser is signed in as: the engine's session (its signed `_session` cookie, the
 * same sign-in as the authorization pages), read with `provider.Session.get`, which the engine
 * offers for pages of the provider's own site. Reading it changes nothing (no cookie is set, the
 * session is not saved or extended). Undefined without a signed-in session, or for a user since deleted.
 */
export async function signedIn(provider: Provider, accounts: Accounts, ctx: Context): Promise<SignedIn | undefined> {
  const session = await provider.Session.get(ctx);
  if (!session.accountId) return undefined;
  const user = await accounts.getUser(session.accountId);
  return user && { user, sessionId: session.jti, sessionUid: session.uid };
}
