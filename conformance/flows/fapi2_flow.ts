import { createHash } from 'node:crypto';

import { decodeJwt } from 'jose';

import type { ModuleContext } from '../context.ts';
import { randomValue } from '../client/authorization_request.ts';
import { FAPI2_ALLOWED_ALGS, postWithDpop, registerFapiClient, resourceWithDpop, thumbprint, type AssertionOptions, type EndpointResponse, type FapiClient, type KeyPair, type ProofOptions } from '../client/fapi2_client.ts';
import { parseIdToken, standardIdTokenChecks, type IdToken } from '../client/id_token.ts';
import { discover, type Provider } from '../client/provider.ts';
import { REDIRECT_URI } from '../client/registration.ts';
import { callbackParams, checkState } from '../checks/authorization_response.ts';
import { pageSummary } from '../checks/error_page.ts';
import { checkServerJwks } from '../checks/jwks.ts';
import { playUser, type Journey } from '../http/interactive_sign_in.ts';
import { mediaType, type HttpResponse } from '../http/http_client.ts';
import type { UserAgent } from '../http/user_agent.ts';

/**
 * AbstractFAPI2SPFinalServerTestModule's flow, for the variants re-created here (private_key_jwt,
 * DPoP, plain_fapi, unsigned requests pushed with PAR, plain responses, openid_connect): discovery
 * and keys, a client registered for the module, the request pushed, the browser sent with its
 * request_uri, the code redeemed with a DPoP proof, the ID token checked, the resource called
 * (the userinfo endpoint, the one resource this runner knows) with the DPoP-bound token.
 */

export interface FapiSession {
  moduleName: string;
  provider: Provider;
  client: FapiClient;
  agent: UserAgent;
}

/** Discovery, keys, the PAR endpoint (the module stops without one), a client. */
export async function fapiSetUp(ctx: ModuleContext, moduleName: string, options: { extraKeys?: KeyPair[] } = {}): Promise<FapiSession> {
  const provider = await discover(ctx);
  await checkServerJwks(ctx, provider.jwks, { requireKids: true });
  ctx.require(typeof provider.metadata.pushed_authorization_request_endpoint === 'string', 'pushed_authorization_request_endpoint is missing from the discovery document: FAPI 2.0 requires PAR (FAPI2-SP-FINAL-5.3.2.2-2)', provider.discoveryExchange);
  const client = await registerFapiClient(ctx, provider, moduleName, options.extraKeys);
  return { moduleName, provider, client, agent: ctx.newUserAgent() };
}

export interface FapiRequest {
  params: Record<string, string>;
  state?: string;
  nonce?: string;
  codeVerifier?: string;
}

export interface FapiRequestOptions {
  scope?: string;
  withoutState?: boolean;
  withoutNonce?: boolean;
  stateLength?: number;
  nonceLength?: number;
  /** PKCE S256 (the default), plain, or none. */
  pkce?: 'S256' | 'plain' | false;
  extra?: Record<string, string>;
  omit?: string[];
}

/** CreateAuthorizationEndpointRequestFromClientInformation for FAPI2: scope openid, state, nonce, PKCE S256, response_type code. */
export function fapiRequest(session: FapiSession, options: FapiRequestOptions = {}): FapiRequest {
  const state = options.withoutState ? undefined : randomValue(options.stateLength);
  const nonce = options.withoutNonce ? undefined : randomValue(options.nonceLength);
  const params: Record<string, string> = {
    client_id: session.client.clientId,
    redirect_uri: session.client.redirectUri,
    scope: options.scope ?? 'openid api',
    response_type: 'code',
    ...(state === undefined ? {} : { state }),
    ...(nonce === undefined ? {} : { nonce }),
  };
  let codeVerifier: string | undefined;
  const pkce = options.pkce ?? 'S256';
  if (pkce) {
    codeVerifier = randomValue(50);
    params.code_challenge = pkce === 'S256' ? createHash('sha256').update(codeVerifier).digest('base64url') : codeVerifier;
    params.code_challenge_method = pkce;
  }
  Object.assign(params, options.extra);
  for (const name of options.omit ?? []) delete params[name];
  return { params, state, nonce, codeVerifier };
}

export interface PushOptions {
  proof?: ProofOptions | false;
  assertion?: AssertionOptions | false;
}

/** CallPAREndpoint: the request pushed with private_key_jwt (and a DPoP proof unless told otherwise). */
export function push(ctx: ModuleContext, session: FapiSession, request: FapiRequest, options: PushOptions = { proof: false }): Promise<EndpointResponse> {
  return postWithDpop(ctx, session.client, session.provider, session.provider.metadata.pushed_authorization_request_endpoint as string, request.params, options);
}

/** CheckPAREndpointResponse201WithNoError, ExtractRequestUriFromPARResponse, ExtractExpiresInFromPARResponse. */
export function expectRequestUri(ctx: ModuleContext, pushed: EndpointResponse): string {
  const { response, body, exchange } = pushed;
  ctx.require(response.status === 201, `the PAR endpoint answered ${response.status}, expected 201 (PAR-2.2): ${response.text.slice(0, 300)}`, exchange);
  ctx.require(typeof body?.request_uri === 'string' && body.request_uri !== '', 'no request_uri in the PAR response (PAR-2.2)', exchange);
  ctx.check(typeof body.expires_in === 'number' && body.expires_in > 0, `expires_in in the PAR response is ${JSON.stringify(body.expires_in)}, expected a positive number (PAR-2.2)`, exchange);
  return body.request_uri;
}

/** BuildRequestObjectByReferenceRedirectToAuthorizationEndpoint: client_id and request_uri only; the user plays along. */
export async function authorizeByReference(ctx: ModuleContext, session: FapiSession, requestUri: string, options: { agent?: UserAgent; extra?: Record<string, string>; deny?: boolean } = {}): Promise<Journey> {
  const url = new URL(session.provider.metadata.authorization_endpoint!);
  url.searchParams.set('client_id', session.client.clientId);
  url.searchParams.set('request_uri', requestUri);
  for (const [name, value] of Object.entries(options.extra ?? {})) url.searchParams.set(name, value);
  return browse(ctx, session, url.href, options.agent, options.deny);
}

/** The browser sent to an authorization URL, the user signing in and allowing (or denying). */
export async function browse(ctx: ModuleContext, session: FapiSession, url: string, agent: UserAgent = session.agent, deny = false): Promise<Journey> {
  const first = await agent.request(url);
  return playUser(agent, first, session.provider.origin, ctx.target.credentials, { returnTo: REDIRECT_URI, deny });
}

/** The redirect's parameters, or the module stops (the OP showed a page). */
export function fapiRedirectParams(ctx: ModuleContext, journey: Journey): Record<string, string> {
  if (journey.landing.kind !== 'redirect') return ctx.fail(`expected the OP to redirect back to the client; it showed a ${pageSummary(journey.landing)}`);
  return callbackParams(journey.landing);
}

/** The authorization response: iss required and equal to the issuer (FAPI 2.0 requires RFC 9207), no error, state, a code. */
export function expectFapiCode(ctx: ModuleContext, session: FapiSession, journey: Journey, request: FapiRequest): string {
  const params = fapiRedirectParams(ctx, journey);
  ctx.check(params.iss === session.provider.metadata.issuer, `'iss' in the authorization response is ${JSON.stringify(params.iss)}, expected the issuer ${session.provider.metadata.issuer} (FAPI2-SP-FINAL-5.3.2.2-7, OAuth2-iss-2)`);
  ctx.require(params.error === undefined, `The authorization was expected to succeed, but the server returned an error from the authorization endpoint: ${params.error}${params.error_description ? ` (${params.error_description})` : ''}`);
  checkState(ctx, params, request);
  ctx.require(typeof params.code === 'string' && params.code !== '', 'no code in the authorization response');
  return params.code;
}

/** The whole front channel: push, send the browser, return the code. */
export async function fapiCode(ctx: ModuleContext, session: FapiSession, request: FapiRequest = fapiRequest(session), pushOptions?: PushOptions): Promise<string> {
  const requestUri = expectRequestUri(ctx, await push(ctx, session, request, pushOptions));
  return expectFapiCode(ctx, session, await authorizeByReference(ctx, session, requestUri), request);
}

/** CallTokenEndpoint for the code: private_key_jwt, a DPoP proof, the PKCE verifier. */
export function redeem(ctx: ModuleContext, session: FapiSession, code: string, request: FapiRequest, options: PushOptions & { form?: Record<string, string> } = {}): Promise<EndpointResponse> {
  const form = {
    grant_type: 'authorization_code', code, redirect_uri: session.client.redirectUri,
    ...(request.codeVerifier === undefined ? {} : { code_verifier: request.codeVerifier }),
    ...options.form,
  };
  return postWithDpop(ctx, session.client, session.provider, session.provider.metadata.token_endpoint!, form, options);
}

export interface FapiTokens {
  accessToken: string;
  tokenType: string;
  refreshToken?: string;
  idToken?: IdToken;
}

/**
 * The token response of a DPoP client: 200, JSON, access_token, token_type DPoP (CheckTokenTypeIsDpop),
 * expires_in; the access token, when a JWT, bound to the DPoP key (cnf.jkt); an ID token for an
 * openid request, checked as OpenID Connect does and signed with an algorithm FAPI 2.0 allows.
 */
export async function acceptTokens(ctx: ModuleContext, session: FapiSession, token: EndpointResponse, request: FapiRequest): Promise<FapiTokens> {
  const { response, body, exchange } = token;
  ctx.require(response.status === 200, `the token endpoint answered ${response.status}, expected 200: ${response.text.slice(0, 300)}`, exchange);
  ctx.check(mediaType(response) === 'application/json', `the token response's Content-Type is ${response.headers.get('content-type')}, expected application/json (RFC6749-5.1)`, exchange);
  ctx.check(/no-store/.test(response.headers.get('cache-control') ?? ''), 'the token response has no Cache-Control: no-store (RFC6749-5.1)', exchange);
  ctx.require(typeof body?.access_token === 'string' && body.access_token !== '', 'access_token is missing or empty in the token endpoint response', exchange);
  ctx.check(typeof body.token_type === 'string' && body.token_type.toLowerCase() === 'dpop', `token_type is ${JSON.stringify(body.token_type)}, expected DPoP (RFC9449-5)`, exchange);
  if (body.expires_in !== undefined) ctx.check(typeof body.expires_in === 'number' && body.expires_in > 0, `expires_in is ${JSON.stringify(body.expires_in)}, expected a positive number (RFC6749-5.1)`, exchange);
  checkAccessTokenBinding(ctx, body.access_token, await thumbprint(session.client.dpopKey));
  const tokens: FapiTokens = {
    accessToken: body.access_token,
    tokenType: String(body.token_type),
    refreshToken: typeof body.refresh_token === 'string' ? body.refresh_token : undefined,
  };
  if (request.params.scope?.split(' ').includes('openid')) {
    const idToken = parseIdToken(ctx, body.id_token);
    await standardIdTokenChecks(ctx, session.provider, session.client, idToken, { nonce: request.nonce });
    ctx.check(FAPI2_ALLOWED_ALGS.includes(String(idToken.header.alg)), `the id_token is signed with ${idToken.header.alg}; FAPI 2.0 allows ${FAPI2_ALLOWED_ALGS.join(', ')} (FAPI2-SP-FINAL-5.4-1)`);
    tokens.idToken = idToken;
  }
  return tokens;
}

/** A JWT access token names the DPoP key it is bound to (RFC 9449 6.1); an opaque one cannot be checked here. */
function checkAccessTokenBinding(ctx: ModuleContext, accessToken: string, jkt: string): void {
  let claims: Record<string, unknown>;
  try {
    claims = decodeJwt(accessToken);
  } catch {
    return;
  }
  const cnf = claims.cnf as { jkt?: unknown } | undefined;
  ctx.check(cnf?.jkt === jkt, `the access token's cnf.jkt is ${JSON.stringify(cnf?.jkt)}, expected the DPoP key's thumbprint ${jkt} (RFC9449-6.1)`);
}

/**
 * CallProtectedResource with the DPoP-bound token, at the userinfo endpoint: 200. When the
 * endpoint answers 401 and names only the Bearer scheme, it does not take DPoP-bound tokens at
 * all: the module cannot go on, and says so rather than fail the OP's token endpoint for it.
 */
export async function callResource(ctx: ModuleContext, session: FapiSession, tokens: FapiTokens, options: { scheme?: string } = {}): Promise<HttpResponse> {
  const url = session.provider.metadata.userinfo_endpoint;
  ctx.require(typeof url === 'string' && url !== '', 'no userinfo_endpoint to call as the protected resource');
  const response = await resourceWithDpop(ctx, session.client, url, tokens.accessToken, options);
  const challenge = response.headers.get('www-authenticate') ?? '';
  if (response.status === 401 && !/\bdpop\b/i.test(challenge)) {
    ctx.notRun(`every step before the resource call passed; the protected resource (userinfo, ${url}) does not accept DPoP-bound access tokens (401, WWW-Authenticate: ${challenge || 'none'}); run again once it does`);
  }
  ctx.check(response.status === 200, `the protected resource (userinfo) answered ${response.status}, expected 200 for the DPoP-bound token: ${response.text.slice(0, 200)}`);
  return response;
}

/** The happy flow: code, tokens, resource. */
export async function fapiHappyFlow(ctx: ModuleContext, session: FapiSession, options: FapiRequestOptions = {}, pushOptions?: PushOptions): Promise<{ request: FapiRequest; code: string; tokens: FapiTokens }> {
  const request = fapiRequest(session, options);
  const code = await fapiCode(ctx, session, request, pushOptions);
  const tokens = await acceptTokens(ctx, session, await redeem(ctx, session, code, request), request);
  await callResource(ctx, session, tokens);
  return { request, code, tokens };
}

/** An error from the token or PAR endpoint: the status, JSON, one of the accepted codes, error_description allowed. */
export function checkEndpointError(ctx: ModuleContext, answer: EndpointResponse, statuses: number[], errors: string[], spec: string): void {
  const { response, body, exchange } = answer;
  ctx.check(statuses.includes(response.status), `the endpoint answered ${response.status}, expected ${statuses.join(' or ')} (${spec}): ${response.text.slice(0, 200)}`, exchange);
  ctx.check(mediaType(response) === 'application/json', `the error's Content-Type is ${response.headers.get('content-type')}, expected application/json (RFC6749-5.2)`, exchange);
  ctx.check(typeof body?.error === 'string' && errors.includes(body.error), `'error' is ${JSON.stringify(body?.error)}, expected ${errors.join(' or ')} (${spec})`, exchange);
}

/** An error at the authorization endpoint: a redirect with one of the codes (state and iss checked), or an error page. */
export function checkAuthorizationError(ctx: ModuleContext, session: FapiSession, journey: Journey, request: FapiRequest | undefined, errors: string[], spec: string): void {
  const { landing } = journey;
  if (landing.kind === 'page') {
    ctx.check(landing.response.status >= 400 && landing.response.status < 500, `the OP showed a ${pageSummary(landing)}; expected an error (${errors.join(' or ')}) (${spec})`);
    ctx.note(`the OP showed an error page, which the suite accepts: ${pageSummary(landing)}`);
    return;
  }
  const params = callbackParams(landing);
  ctx.check(params.code === undefined, `the OP issued a code; expected ${errors.join(' or ')} (${spec})`);
  ctx.check(params.error !== undefined && errors.includes(params.error), `'error' is ${JSON.stringify(params.error)}, expected ${errors.join(' or ')} (${spec})`);
  if (params.iss !== undefined) ctx.check(params.iss === session.provider.metadata.issuer, `'iss' in the error response is ${params.iss}, expected the issuer (OAuth2-iss-2)`);
  if (request) checkState(ctx, params, request);
}
