import type { Context } from 'koa';

import { redirectTarget } from './client_display.ts';
import { renderPage } from './render.ts';

/** A form the browser posts by itself as soon as the page is read: the engine's answers by form_post, and its sign-out steps. */
export interface AutoPostForm {
  /** Where the form posts. */
  action: string;
  fields: Record<string, string>;
}

/** Who the form goes to, as the page names them. */
export type AutoPostTarget =
  | { kind: 'sign-out' }
  | { kind: 'client'; clientName: string };

/**
 * Submits the page's form as soon as the page is read. Allowed by its hash, so no other script can
 * run; the form's own name is used, as an input named `submit` would hide the form's method.
 */
const SUBMIT_ON_LOAD = "document.addEventListener('DOMContentLoaded', function () { HTMLFormElement.prototype.submit.call(document.getElementById('auto-post')); });";

/**
 * The self-submitting form in the product's layout: what is happening, in words, and a Continue
 * button for a browser that runs no script (or is slow to). Where the form may post and be
 * redirected is left as open as the engine's own page leaves it (a client's callback may redirect
 * anywhere), plus the target's scheme when it is a native app's.
 */
export async function renderAutoPostPage(ctx: Context, form: AutoPostForm, target: AutoPostTarget): Promise<void> {
  const destination = redirectTarget(form.action);
  const words = target.kind === 'sign-out'
    ? { heading: 'Signing you out', message: 'Your browser is finishing the sign-out.', button: 'Continue' }
    : {
      heading: `Returning to ${target.clientName}`,
      message: `Your browser is sending you back to ${target.clientName} at ${destination.label}.`,
      button: `Continue to ${target.clientName}`,
    };
  await renderPage(ctx, 'auto_post', words.heading, { ...words, form, submitOnLoad: SUBMIT_ON_LOAD }, {
    formAction: ['*', ...destination.formAction.filter((source) => source.endsWith(':'))],
    inlineScript: SUBMIT_ON_LOAD,
  });
}
