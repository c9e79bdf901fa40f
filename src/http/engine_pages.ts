import type { Accounts } from '../accounts/accounts.ts';
import type { EnginePages } from '../engine/provider.ts';
import { logoutPages } from '../interactions/logout.ts';
import { renderErrorPage } from '../pages/render.ts';
import { markErrorPageShown } from './endpoints/authorization.ts';
import { isBackendOutage } from './errors.ts';

/**
 * The pages the engine shows, in the product's layout: its error page, for errors that must not
 * redirect to the client (an unknown client, an unregistered redirect_uri; a store outage is a
 * 503), and the sign-out question and its answer.
 */
export function enginePages(accounts: Accounts, issuer: string): EnginePages {
  return {
    renderError: async (ctx, out, error) => {
      if (isBackendOutage(error)) ctx.status = 503;
      const code = isBackendOutage(error) ? 'temporarily_unavailable' : String(out.error ?? 'server_error');
      markErrorPageShown(ctx);
      await renderErrorPage(ctx, code, typeof out.error_description === 'string' ? out.error_description : undefined);
    },
    ...logoutPages({ accounts, issuer }),
  };
}
