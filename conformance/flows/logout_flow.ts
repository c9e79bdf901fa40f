import { randomInt } from 'node:crypto';

import type { ModuleContext } from '../context.ts';
import { pageSummary } from '../checks/error_page.ts';
import { HTTPS_RULE, isHttpsOrLoopback } from '../checks/urls.ts';
import { REDIRECT_URI } from '../client/registration.ts';
import { forms, pageButtons } from '../http/html.ts';
import { followRedirects, type Landing } from '../http/user_agent.ts';
import { happyFlow, setUp, type Session } from './code_flow.ts';

/**
 * CreatePostLogoutRedirectUri: the suite's base URL and /post_logout_redirect, registered with
 * each client (AddPostLogoutRedirectUriToDynamicRegistrationRequest); under .invalid, as the
 * redirect URI is, so nothing is ever sent there.
 */
export const POST_LOGOUT_REDIRECT_URI = new URL('/post_logout_redirect', REDIRECT_URI).href;
/** AddBadPostLogoutRedirectUriToEndSessionEndpointRequest's URI: never registered. */
export const BAD_POST_LOGOUT_REDIRECT_URI = new URL('/bad_post_logout_redirect_uri', REDIRECT_URI).href;

/** RFC 6749 Appendix A VSCHAR less `+`, space and `;`, which the suite replaces with `~` (CreateRandomEndSessionState). */
const STATE_CHARACTERS = Array.from({ length: 0x7e - 0x20 + 1 }, (_, i) => String.fromCharCode(0x20 + i)).map((c) => (c === '+' || c === ' ' || c === ';' ? '~' : c));

function randomEndSessionState(): string {
  const length = 30 + randomInt(21);
  return Array.from({ length }, () => STATE_CHARACTERS[randomInt(STATE_CHARACTERS.length)]).join('');
}

export interface SignedIn {
  session: Session;
  /** The ID token of the first authorization: the end session request's id_token_hint. */
  idToken: string;
}

/**
 * AbstractOIDCCRpInitiatedLogout up to its logout: a client registered with a post_logout_redirect_uri,
 * the normal authorization flow (with a 128-character state), its ID token kept.
 */
export async function signInForLogout(ctx: ModuleContext, moduleName: string): Promise<SignedIn> {
  const session = await setUp(ctx, moduleName, { registration: { post_logout_redirect_uris: [POST_LOGOUT_REDIRECT_URI] } });
  const flow = await happyFlow(ctx, session, { request: { stateLength: 128 } });
  return { session, idToken: flow.tokens.idToken.raw };
}

/** CreateEndSessionEndpointRequest: id_token_hint, post_logout_redirect_uri and a random state. */
export function endSessionRequest(signedIn: SignedIn): Record<string, string> {
  return { id_token_hint: signedIn.idToken, post_logout_redirect_uri: POST_LOGOUT_REDIRECT_URI, state: randomEndSessionState() };
}

/**
 * BuildRedirectToEndSessionEndpoint and the browser's visit: to the end_session_endpoint with
 * `params` in the query, then, where the OP asks whether to sign out, the user's "yes" (the
 * suite's browser is driven to press it, as it is to sign in). Ends where the OP sends the
 * browser out (a redirect landing) or on the page it shows last.
 */
export async function endSession(ctx: ModuleContext, { provider, agent }: Session, params: Record<string, string>): Promise<Landing> {
  const endpoint = provider.metadata.end_session_endpoint;
  ctx.require(typeof endpoint === 'string' && endpoint !== '', 'end_session_endpoint is missing from the discovery document (OIDCRIL-2.1)');
  const url = new URL(endpoint);
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  let landing = await followRedirects(agent, await agent.request(url.href), provider.origin);
  for (let step = 0; step < 2 && landing.kind === 'page'; step += 1) {
    const confirmation = signOutAnswer(landing.response.text, landing.url, endpoint);
    if (!confirmation) break;
    landing = await followRedirects(agent, await agent.request(confirmation.action, { method: 'POST', form: confirmation.values }), provider.origin);
  }
  return landing;
}

/**
 * A page's way to say yes to signing out: a form posting to the end_session_endpoint (or under
 * it), with the `logout` field a browser sends when its "yes" button is pressed. The form may post
 * itself (it has the field) or the button may stand outside it (`form=`).
 */
function signOutAnswer(html: string, pageUrl: string, endpoint: string): { action: string; values: Record<string, string> } | undefined {
  for (const form of forms(html)) {
    const action = new URL(form.action || pageUrl, pageUrl).href;
    if (form.method !== 'POST' || !action.startsWith(endpoint)) continue;
    const values = Object.fromEntries(form.fields.filter((field) => field.type === 'hidden').map((field) => [field.name, field.value]));
    const yes = form.fields.find((field) => field.name === 'logout') ?? pageButtons(html).find((field) => field.name === 'logout');
    if (!yes) continue;
    return { action, values: { ...values, logout: yes.value } };
  }
  return undefined;
}

/**
 * The OP's redirect to the registered post_logout_redirect_uri: CheckPostLogoutState (or, with no
 * state sent, CheckNoPostLogoutState) and CheckForUnexpectedParametersInPostLogoutRedirect (a warning).
 */
export function expectPostLogoutRedirect(ctx: ModuleContext, landing: Landing, state: string | undefined): void {
  if (landing.kind !== 'redirect' || !landing.url.href.startsWith(POST_LOGOUT_REDIRECT_URI)) {
    ctx.fail(`expected the OP to send the browser to the post_logout_redirect_uri ${POST_LOGOUT_REDIRECT_URI}; it ended on a ${pageSummary(landing)} (OIDCRIL-2)`);
  }
  const params = Object.fromEntries(landing.url.searchParams);
  if (state === undefined) {
    ctx.check(params.state === undefined, `state was not in the end session request, but the post logout redirect has one (${params.state}) (OIDCRIL-2)`);
  } else {
    ctx.check(params.state !== undefined, 'state not present in query params passed to post logout redirect uri (OIDCRIL-2)');
    ctx.check(params.state === undefined || params.state === state, `state in query params passed to post logout redirect uri does not match state passed in the end_session request: sent ${state}, got ${params.state} (OIDCRIL-2)`);
  }
  const unexpected = Object.keys(params).filter((name) => name !== 'state');
  ctx.warn(unexpected.length === 0, `post_logout_redirect includes unexpected parameters in url query: ${unexpected.join(', ')}`);
}

/**
 * Where the OP must not send the browser back: no redirect out of the OP at all, the post logout
 * redirect URI registered or the one asked for; what the page says is left to the reviewer (the
 * suite asks for a screenshot), noted here.
 */
export function expectNoRedirectBack(ctx: ModuleContext, landing: Landing, because: string): void {
  if (landing.kind === 'redirect') ctx.fail(`OP has incorrectly sent the browser to ${landing.url.origin}${landing.url.pathname} even though ${because} (OIDCRIL-2)`);
  ctx.check(landing.response.status < 500, `the OP answered the end session request ${landing.response.status}, a server error`);
  ctx.note(`the page the OP showed (the suite asks for a screenshot of it): ${pageSummary(landing)}`);
}

/** CheckDiscEndSessionEndpoint and CheckDiscEndpointAllEndpointsAreHttps. */
export function checkEndSessionEndpoint(ctx: ModuleContext, metadata: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(metadata)) {
    if (key.endsWith('_endpoint')) ctx.check(typeof value === 'string' && isHttpsOrLoopback(value), `${key} (${String(value)}) is not a valid URL using ${HTTPS_RULE}`);
  }
  ctx.check(typeof metadata.end_session_endpoint === 'string', 'end_session_endpoint is missing from the discovery document (OIDCBCL-3, OIDCRIL-2.1)');
}
