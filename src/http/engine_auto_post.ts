import type { Middleware } from 'koa';

import { oidcOf } from '../engine/context.ts';
import { ENGINE_ROUTE_TEMPLATES } from '../engine/routes.ts';
import { renderAutoPostPage, type AutoPostForm } from '../pages/auto_post.ts';
import { errorDescriptionFor } from '../shared/error_description.ts';

/**
 * The engine's self-submitting page (oidc-provider's lib/response_modes/form_post.js), rendered in
 * the product's layout with the same form. The engine serves it for `response_mode=form_post`, and
 * posting to its own sign-out confirmation for a sign-out without a session and for signing in as
 * another user while signed in. As the engine writes it, the page has no language, no layout and
 * no words for whoever sees it: a browser that runs no script, or a screen reader announcing
 * "Submitting Callback". The engine has no hook for the sign-out pages, so its page is read back
 * here on the way out. A page that does not read as the engine's is left as it is (it still works
 * under the policy security_headers.ts gives these paths).
 */
export function engineAutoPostInLayout(issuer: string): Middleware {
  const signOutConfirmation = `${issuer}${ENGINE_ROUTE_TEMPLATES.end_session_confirm}`;
  return async (ctx, next) => {
    await next();
    if (typeof ctx.body !== 'string' || !ctx.response.is('html')) return;
    const form = engineAutoPostForm(ctx.body);
    if (!form) return;
    if (form.action === signOutConfirmation) {
      await renderAutoPostPage(ctx, form, { kind: 'sign-out' });
      return;
    }
    // RFC 6749 section 4.1.2.1, and a description where the engine gives none, as for a redirect (src/http/endpoints/authorization.ts).
    const described = form.fields.error === undefined ? undefined : errorDescriptionFor(form.fields.error, form.fields.error_description);
    if (described !== undefined) form.fields.error_description = described;
    const client = oidcOf(ctx)?.client;
    await renderAutoPostPage(ctx, form, { kind: 'client', clientName: client?.clientName || client?.clientId || 'the application' });
  };
}

const ENGINE_PAGE_TITLE = '<title>Submitting Callback</title>';
const FORM = /<form method="post" action="([^"]*)">/;
const HIDDEN_INPUT = /<input type="hidden" name="([^"]*)" value="([^"]*)"\/>/g;

/** The form of the engine's self-submitting page, or undefined for any other page. */
export function engineAutoPostForm(html: string): AutoPostForm | undefined {
  if (!html.includes(ENGINE_PAGE_TITLE)) return undefined;
  const action = FORM.exec(html)?.[1];
  if (action === undefined) return undefined;
  const fields = Object.fromEntries([...html.matchAll(HIDDEN_INPUT)].map(([, name, value]) => [unescapeHtml(name!), unescapeHtml(value!)]));
  return { action: unescapeHtml(action), fields };
}

/** Undoes the engine's escaping of attribute values (lib/helpers/html_safe.js): `&` last, as it was first. */
function unescapeHtml(text: string): string {
  return text.replaceAll('&#39;', "'").replaceAll('&quot;', '"').replaceAll('&gt;', '>').replaceAll('&lt;', '<').replaceAll('&amp;', '&');
}
