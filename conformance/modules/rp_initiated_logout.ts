import { generateKeyPair, SignJWT } from 'jose';

import type { ModuleContext } from '../context.ts';
import { fetchMetadata } from '../client/provider.ts';
import {
  BAD_POST_LOGOUT_REDIRECT_URI, checkEndSessionEndpoint, endSession, endSessionRequest, expectNoRedirectBack, expectPostLogoutRedirect,
  POST_LOGOUT_REDIRECT_URI, signInForLogout, type SignedIn,
} from '../flows/logout_flow.ts';
import { expectUserNeeded } from '../flows/code_flow.ts';
import type { ConformanceModule } from '../module.ts';

/**
 * OIDCCRpInitiatedLogoutTestPlan's modules (OpenID Connect RP-Initiated Logout 1.0): each signs
 * in as the basic plan's happy flow does, then sends the browser to the end_session_endpoint with
 * the request its suite module makes, and checks where the OP sends it.
 */

const SCREENSHOT = 'the suite asks for a screenshot of the page the OP shows; this runner checks the OP kept the browser (no redirect out of it) and notes the page';

export const rpInitiatedLogoutDiscovery: ConformanceModule = {
  name: 'oidcc-rp-initiated-logout-discovery-endpoint-verification',
  summary: 'the discovery document has an end_session_endpoint, and every *_endpoint is https',
  async run(ctx: ModuleContext) {
    const { metadata } = await fetchMetadata(ctx);
    checkEndSessionEndpoint(ctx, metadata);
  },
};

export const rpInitiatedLogout: ConformanceModule = {
  name: 'oidcc-rp-initiated-logout',
  summary: 'after a sign-in, the end session request (id_token_hint, registered post_logout_redirect_uri, state) returns the browser there with the state; a prompt=none authorization then needs the user',
  async run(ctx: ModuleContext) {
    const signedIn = await signInForLogout(ctx, this.name);
    const request = endSessionRequest(signedIn);
    expectPostLogoutRedirect(ctx, await endSession(ctx, signedIn.session, request), request.state);
    // The user is signed out: a prompt=none authorization needs them.
    await expectUserNeeded(ctx, signedIn.session);
  },
};

export const rpInitiatedLogoutNoState: ConformanceModule = {
  name: 'oidcc-rp-initiated-logout-no-state',
  summary: 'the end session request without state returns the browser to the post_logout_redirect_uri without one; a prompt=none authorization then needs the user',
  async run(ctx: ModuleContext) {
    const signedIn = await signInForLogout(ctx, this.name);
    const { state: _state, ...request } = endSessionRequest(signedIn);
    expectPostLogoutRedirect(ctx, await endSession(ctx, signedIn.session, request), undefined);
    // The user is signed out: a prompt=none authorization needs them.
    await expectUserNeeded(ctx, signedIn.session);
  },
};

/** A module whose end session request the OP must not answer by sending the browser back: `change` makes it from the normal one. */
function noRedirectBack(name: string, summary: string, because: string, change: (request: Record<string, string>, signedIn: SignedIn, ctx: ModuleContext) => Record<string, string> | Promise<Record<string, string>>): ConformanceModule {
  return {
    name,
    summary,
    review: SCREENSHOT,
    async run(ctx: ModuleContext) {
      const signedIn = await signInForLogout(ctx, this.name);
      const request = await change(endSessionRequest(signedIn), signedIn, ctx);
      expectNoRedirectBack(ctx, await endSession(ctx, signedIn.session, request), because);
    },
  };
}

export const rpInitiatedLogoutBadPostLogoutRedirectUri = noRedirectBack(
  'oidcc-rp-initiated-logout-bad-post-logout-redirect-uri',
  'a post_logout_redirect_uri that is not registered: the OP shows an error or asks the user, and does not redirect',
  'a post_logout_redirect_uri that is not registered was requested',
  (request) => ({ ...request, post_logout_redirect_uri: BAD_POST_LOGOUT_REDIRECT_URI }),
);

export const rpInitiatedLogoutModifiedIdTokenHint = noRedirectBack(
  'oidcc-rp-initiated-logout-modified-id-token-hint',
  'an id_token_hint changed to alg none: the OP shows an error or asks the user, and does not redirect',
  'an invalid id_token_hint was provided',
  // ChangeIdTokenToAlgNone: the header replaced, the payload kept, no signature.
  (request) => ({ ...request, id_token_hint: `${Buffer.from('{"alg": "none"}').toString('base64url')}.${request.id_token_hint!.split('.')[1]}.` }),
);

export const rpInitiatedLogoutNoIdTokenHint = noRedirectBack(
  'oidcc-rp-initiated-logout-no-id-token-hint',
  'a post_logout_redirect_uri without id_token_hint: the OP shows an error or asks the user, and does not redirect',
  'no id_token_hint was provided',
  ({ id_token_hint: _hint, ...request }) => request,
);

export const rpInitiatedLogoutNoParams = noRedirectBack(
  'oidcc-rp-initiated-logout-no-params',
  'an end session request with no parameters: the OP signs the user out and shows that, without redirecting',
  'the post_logout_redirect_uri was not in the request',
  () => ({}),
);

export const rpInitiatedLogoutNoPostLogoutRedirectUri = noRedirectBack(
  'oidcc-rp-initiated-logout-no-post-logout-redirect-uri',
  'an end session request without post_logout_redirect_uri: the OP signs the user out and shows that, without redirecting',
  'the post_logout_redirect_uri was not in the request',
  ({ post_logout_redirect_uri: _uri, ...request }) => request,
);

export const rpInitiatedLogoutOnlyState = noRedirectBack(
  'oidcc-rp-initiated-logout-only-state',
  'an end session request with only state: the OP signs the user out and shows that, without redirecting',
  'the post_logout_redirect_uri was not in the request',
  ({ state }) => ({ state: state! }),
);

export const rpInitiatedLogoutQueryAdded = noRedirectBack(
  'oidcc-rp-initiated-logout-query-added-to-post-logout-redirect-uri',
  'the registered post_logout_redirect_uri with ?foo=bar added: the OP shows an error or asks the user, and does not redirect',
  'a post_logout_redirect_uri other than the registered one was requested',
  (request) => ({ ...request, post_logout_redirect_uri: `${POST_LOGOUT_REDIRECT_URI}?foo=bar` }),
);

export const rpInitiatedLogoutBadIdTokenHint = noRedirectBack(
  'oidcc-rp-initiated-logout-bad-id-token-hint',
  'an id_token_hint the suite signed itself (GenerateFakeIdTokenClaims): the OP shows an error or asks the user, and does not redirect',
  'an invalid id_token_hint was provided',
  async (request, { session }) => {
    // Issued "by the client" to the OP (iss and aud the wrong way round, as the suite makes them), signed with a key of the suite's.
    const { privateKey } = await generateKeyPair('RS256');
    const now = Math.floor(Date.now() / 1000);
    const fake = await new SignJWT({ nonce: 'flibble' }).setProtectedHeader({ alg: 'RS256' })
      .setIssuer(session.client.clientId).setSubject('SubjectID').setAudience(session.provider.metadata.issuer!).setIssuedAt(now).setExpirationTime(now + 300)
      .sign(privateKey);
    return { ...request, id_token_hint: fake };
  },
);

/** OIDCCRpInitiatedLogoutTestPlan, in its order. */
export const RP_INITIATED_LOGOUT_MODULES: ConformanceModule[] = [
  rpInitiatedLogoutDiscovery, rpInitiatedLogout, rpInitiatedLogoutBadPostLogoutRedirectUri, rpInitiatedLogoutModifiedIdTokenHint,
  rpInitiatedLogoutNoIdTokenHint, rpInitiatedLogoutNoParams, rpInitiatedLogoutNoPostLogoutRedirectUri, rpInitiatedLogoutNoState,
  rpInitiatedLogoutOnlyState, rpInitiatedLogoutQueryAdded, rpInitiatedLogoutBadIdTokenHint,
];
