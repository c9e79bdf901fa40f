import type { ModuleContext } from '../context.ts';
import { REDIRECT_URI } from '../client/registration.ts';
import { callbackParams } from '../checks/authorization_response.ts';
import { pageSummary } from '../checks/error_page.ts';
import { imageSources, linkTargets } from '../http/html.ts';
import { authorizeWith, setUp } from '../flows/code_flow.ts';
import type { ConformanceModule } from '../module.ts';

const RP_ORIGIN = new URL(REDIRECT_URI).origin;

interface ShownUri {
  name: string;
  metadata: 'logo_uri' | 'policy_uri' | 'tos_uri';
  /** The value the suite registers (CreateLogoUri, CreatePolicyUri, CreateTosUri). */
  value: string;
  /** Where the page must show it: an image, or a link. */
  shownAs: 'image' | 'link';
  summary: string;
}

/**
 * OIDCCRegistrationLogoUri / PolicyUri / TosUri: register with the URI, send the browser to the
 * authorization endpoint with no session, and look at the login page. The suite asks for a
 * screenshot; this runner reads the login page's HTML for the image or the link.
 */
function shownOnLoginPage({ name, metadata, value, shownAs, summary }: ShownUri): ConformanceModule {
  return {
    name,
    summary,
    review: `the suite asks for a screenshot of the login page showing the client's ${metadata}; this runner checks the login page's HTML has ${shownAs === 'image' ? `an <img src> of` : 'a link (<a href>) to'} it`,
    async run(ctx: ModuleContext) {
      const session = await setUp(ctx, name, { registration: { [metadata]: value } });
      const front = await authorizeWith(ctx, session, {}, { stopAtLogin: true });
      const { landing, pages } = front.journey;
      if (landing.kind === 'redirect') {
        const { error, error_description: description } = callbackParams(landing);
        ctx.require(error === undefined, `The authorization was expected to succeed, but the server returned an error from the authorization endpoint: ${error} ${description ?? ''}`.trim());
      }
      const login = pages.find((page) => page.kind === 'login');
      ctx.require(login !== undefined, `no login page was shown (the OP answered: ${pageSummary(landing)})`);
      const shown = shownAs === 'image' ? imageSources(login.html) : linkTargets(login.html);
      const wanted = normalized(value);
      ctx.check(shown.some((uri) => normalized(uri) === wanted), `the login page does not show the registered ${metadata} ${value} as ${shownAs === 'image' ? 'an image' : 'a link'} (OIDCR-2); it has ${shownAs === 'image' ? 'images' : 'links'} ${JSON.stringify(shown)}`);
      ctx.note(`read the login page at ${login.url}`);
    },
  };
}

/** https://openid.net and https://openid.net/ are the same address. */
function normalized(uri: string): string {
  return URL.parse(uri)?.href ?? uri;
}

export const logoUri = shownOnLoginPage({
  name: 'oidcc-registration-logo-uri',
  metadata: 'logo_uri',
  value: `${RP_ORIGIN}/images/openid.png`,
  shownAs: 'image',
  summary: 'a client registered with logo_uri: the login page must show the logo',
});

export const policyUri = shownOnLoginPage({
  name: 'oidcc-registration-policy-uri',
  metadata: 'policy_uri',
  value: `${RP_ORIGIN}/login.html`,
  shownAs: 'link',
  summary: 'a client registered with policy_uri: the login page must link to the policy',
});

export const tosUri = shownOnLoginPage({
  name: 'oidcc-registration-tos-uri',
  metadata: 'tos_uri',
  value: 'https://openid.net',
  shownAs: 'link',
  summary: 'a client registered with tos_uri: the login page must link to the terms of service',
});
