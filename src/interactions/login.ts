import type { Context } from 'koa';
import type { Provider } from 'oidc-provider';

import { isVetted } from '../clients/vetting.ts';
import { INTERACTION_PATH } from '../engine/routes.ts';
import { clientDisplay, clientDocuments, redirectTarget, type ClientDisplay } from '../pages/client_display.ts';
import { renderPage } from '../pages/render.ts';
import type { CsrfTokens } from '../pages/csrf.ts';

export type Details = Awaited<ReturnType<Provider['interactionDetails']>>;

export interface LoginPageDependencies {
  provider: Provider;
  csrf: CsrfTokens;
  basePath: string;
}

/**
 * The sign-in page, again with what was typed and why it failed when `form` says so. `switching`:
 * a signed-in user asked, from the consent page, to go on with another account; the engine signs
 * the first one out once the other has signed in (its sign-out confirmation), then asks the new
 * one for consent, in the same authorization request.
 */
export async function showLogin(ctx: Context, { provider, csrf, basePath }: LoginPageDependencies, details: Details, form: { email?: string; error?: string; switching?: boolean } = {}) {
  const client = await findClient(provider, details);
  const email = form.email ?? (form.switching ? '' : loginHint(details));
  await renderPage(ctx, 'login', 'Sign in', {
    clientName: client.name,
    client,
    documents: clientDocuments(client),
    action: `${basePath}${INTERACTION_PATH}/${details.uid}/login`,
    csrfToken: csrf.issue(details.uid),
    // OpenID Connect Core 3.1.2.1: login_hint is how the client names the account it expects.
    email,
    error: form.error,
    // After a failed sign-in the email is kept: the password is what to type again, so the cursor waits there.
    focusPassword: Boolean(form.error && email),
    switching: form.switching ?? false,
  }, { formAction: redirectTarget(String(details.params.redirect_uri)).formAction, imgSrc: client.logo && [client.logo.origin] });
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
