import type { Context } from 'koa';
import type { Provider } from 'oidc-provider';

import type { Accounts } from '../accounts/accounts.ts';
import { SETTINGS_CLIENT_ID, SIGNED_OUT_COOKIE, type SignedOutReason } from '../clients/first_party.ts';
import { isVetted } from '../clients/vetting.ts';
import { ENGINE_ROUTES, INTERACTION_PATH } from '../engine/routes.ts';
import { clientDisplay, clientDocuments, redirectTarget, type ClientDisplay } from '../pages/client_display.ts';
import { renderPage } from '../pages/render.ts';
import type { CsrfTokens } from '../pages/csrf.ts';
import { inWords } from '../shared/words.ts';

export type Details = Awaited<ReturnType<Provider['interactionDetails']>>;

export interface LoginPageDependencies {
  provider: Provider;
  accounts: Accounts;
  csrf: CsrfTokens;
  basePath: string;
}

/**
 * The sign-in page, again with what was typed and why it failed when `form` says so. `switching`:
 * a signed-in user asked, from the consent page, to go on with another account; the engine signs
 * the first one out once the other has signed in (its sign-out confirmation), then asks the new
 * one for consent, in the same authorization request.
 */
export async function showLogin(ctx: Context, { provider, accounts, csrf, basePath }: LoginPageDependencies, details: Details, form: { email?: string; error?: string; switching?: boolean } = {}) {
  const client = await findClient(provider, details);
  const settingsSignIn = details.params.client_id === SETTINGS_CLIENT_ID;
  const again = await signInAgain(accounts, details);
  const email = form.email ?? (form.switching ? '' : loginHint(details) || (again?.anotherAccount ? '' : again?.email) || '');
  await renderPage(ctx, 'login', 'Sign in', {
    // The form says it signs in to the settings area, for when its interaction is gone by the time it is sent (src/interactions/router.ts).
    settingsSignIn,
    // A settings page sent here by a session that ended: why this browser is signed out.
    signedOut: settingsSignIn ? signedOutNotice(ctx) : undefined,
    clientName: client.name,
    client,
    documents: clientDocuments(client),
    action: `${basePath}${INTERACTION_PATH}/${details.uid}/login`,
    csrfToken: csrf.issue(details.uid),
    // OpenID Connect Core 3.1.2.1: login_hint is how the client names the account it expects.
    email,
    error: form.error,
    // After a failed sign-in the email is kept, and asked again the signed-in user's is there: the password is what to type, so the cursor waits there.
    focusPassword: Boolean((form.error || again) && email),
    switching: form.switching ?? false,
    again,
    userEmail: again?.email,
    signOutUrl: `${basePath}${ENGINE_ROUTES.end_session}`,
  }, { formAction: redirectTarget(String(details.params.redirect_uri)).formAction, imgSrc: client.logo && [client.logo.origin] });
}

const SIGNED_OUT_NOTICES: Readonly<Record<SignedOutReason, string>> = {
  'password-changed': 'Your password was changed, so you were signed out here. Sign in with the new password.',
  'session-ended': 'You were signed out (your session ended or your password was changed). Sign in again.',
};

/** What the settings sign-in says of a browser it found signed out (its cookie, src/settings/sign_in.ts): one of the sentences above, or none. */
function signedOutNotice(ctx: Context): string | undefined {
  const reason = ctx.cookies.get(SIGNED_OUT_COOKIE, { signed: true });
  return reason !== undefined && Object.hasOwn(SIGNED_OUT_NOTICES, reason) ? SIGNED_OUT_NOTICES[reason as SignedOutReason] : undefined;
}

/** A signed-in user the application asks to sign in again: who, and why when the page can say. */
interface SignInAgain {
  email: string;
  /** The `max_age` in words, when that is why. */
  within?: string;
  /** The application asks for another account (an `id_token_hint` or a `claims` `sub` of someone else's). */
  anotherAccount?: true;
}

/** The engine's reasons for a sign-in that mean the account signed in is not the one the application asks for. */
const ANOTHER_ACCOUNT_REASONS = ['id_token_hint', 'claims_id_token_sub_value'];

/**
 * The user already signed in, when the application asks them to sign in again (`prompt=login`, a
 * `max_age` their sign-in is older than, an `id_token_hint` of someone else's): the page says who
 * is signed in and that the application asks, or the plain form would read as a lost session.
 */
async function signInAgain(accounts: Accounts, details: Details): Promise<SignInAgain | undefined> {
  const accountId = details.session?.accountId;
  if (details.prompt.name !== 'login' || !accountId) return undefined;
  const user = await accounts.getUser(accountId);
  if (!user) return undefined;
  const { reasons } = details.prompt;
  // Signing in again as the same account would only show this page again.
  if (reasons.some((reason) => ANOTHER_ACCOUNT_REASONS.includes(reason))) return { email: user.email, anotherAccount: true };
  const maxAge = Number(details.params.max_age);
  const tooOld = reasons.includes('max_age') && Number.isInteger(maxAge) && maxAge > 0;
  return tooOld ? { email: user.email, within: inWords(maxAge) } : { email: user.email };
}

function loginHint(details: Details): string {
  const hint = details.params.login_hint;
  return typeof hint === 'string' && hint.length <= 254 ? hint : '';
}

/** The application the interaction is for, as the pages show it (its own logo and documents, never another's). */
export async function findClient(provider: Provider, details: Details): Promise<ClientDisplay> {
  const clientId = String(details.params.client_id);
  const client = await provider.Client.find(clientId);
  return clientDisplay(clientId, client, client !== undefined && isVetted(client));
}
