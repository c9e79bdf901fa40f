import type { ModuleContext } from '../context.ts';
import { authorizationRequest, authorizationUrl, type AuthorizationRequest, type RequestOptions } from '../client/authorization_request.ts';
import { checkHashClaim, parseIdToken, standardIdTokenChecks, type IdToken } from '../client/id_token.ts';
import { discover, stringList, type Provider } from '../client/provider.ts';
import { REDIRECT_URI, register, registrationRequest, unregister, type Client, type ClientAuthMethod } from '../client/registration.ts';
import { authorizationCodeGrant, callTokenEndpoint, type TokenEndpointResponse } from '../client/token_endpoint.ts';
import { callUserinfo, type AccessToken } from '../client/userinfo.ts';
import { checkServerJwks } from '../checks/jwks.ts';
import { callbackParams, checkErrorCode, checkErrorResponse, checkIss, checkRedirectQueryKept, checkState } from '../checks/authorization_response.ts';
import { pageSummary } from '../checks/error_page.ts';
import { checkUserinfoStatus } from '../checks/userinfo.ts';
import { playUser, type Journey, type JourneyOptions } from '../http/interactive_sign_in.ts';
import type { UserAgent } from '../http/user_agent.ts';
import type { ResponseMode } from '../plans.ts';

/** What a module works with once configured: the OP as discovered, its client, its browser. */
export interface Session {
  moduleName: string;
  provider: Provider;
  client: Client;
  agent: UserAgent;
  /** The plan's response_mode variant (ModuleContext.responseMode). */
  responseMode: ResponseMode;
}

export interface SetUpOptions {
  authMethod?: ClientAuthMethod;
  /** Metadata a module adds to the registration request (id_token_signed_response_alg, logo_uri, ...). */
  registration?: Record<string, unknown>;
  /** Runs before the client is registered: where the suite skips a module the discovery document rules out. */
  beforeRegister?: (provider: Provider) => void;
}

/**
 * AbstractOIDCCServerTest.configure(): discovery, the server's keys, the client authentication
 * method offered, and a client registered for this module (unregistered afterwards).
 */
export async function setUp(ctx: ModuleContext, moduleName: string, options: SetUpOptions = {}): Promise<Session> {
  const provider = await discover(ctx);
  await checkServerJwks(ctx, provider.jwks, { requireKids: true });
  const authMethod = options.authMethod ?? 'client_secret_basic';
  checkAuthMethodOffered(ctx, provider, authMethod);
  options.beforeRegister?.(provider);
  const client = await register(ctx, provider, registrationRequest(ctx, moduleName, authMethod, options.registration));
  ctx.onCleanup(() => unregister(ctx, client));
  return { moduleName, provider, client, agent: ctx.newUserAgent(), responseMode: ctx.responseMode };
}

/** EnsureServerConfigurationSupportsClientSecretBasic (absent means basic) / ...ClientSecretPost. */
function checkAuthMethodOffered(ctx: ModuleContext, provider: Provider, method: ClientAuthMethod): void {
  const offered = stringList(provider.metadata, 'token_endpoint_auth_methods_supported');
  const ok = offered === undefined ? method === 'client_secret_basic' : offered.includes(method);
  ctx.check(ok, `token_endpoint_auth_methods_supported (${JSON.stringify(offered)}) does not contain ${method}`, provider.discoveryExchange);
}

export interface FrontChannel {
  request: AuthorizationRequest;
  /** The URL the browser was sent to (for POST: the endpoint, the parameters in the body). */
  url: string;
  journey: Journey;
}

export interface AuthorizeOptions extends JourneyOptions {
  method?: 'GET' | 'POST';
  order?: 'sorted' | 'reversed';
  /** The parameters on the wire when they are not the request's own (request objects). */
  wire?: Record<string, string>;
  agent?: UserAgent;
}

/** Sends the browser to the authorization endpoint and plays the user until the OP answers the client. */
export async function authorize(ctx: ModuleContext, session: Session, request: AuthorizationRequest, options: AuthorizeOptions = {}): Promise<FrontChannel> {
  const endpoint = session.provider.metadata.authorization_endpoint!;
  const agent = options.agent ?? session.agent;
  const params = options.wire ?? request.params;
  const method = options.method ?? 'GET';
  const url = method === 'GET' ? authorizationUrl(endpoint, params, options.order) : endpoint;
  const first = method === 'GET' ? await agent.request(url) : await agent.request(endpoint, { method: 'POST', form: params });
  const journey = await playUser(agent, first, session.provider.origin, ctx.target.credentials, { returnTo: REDIRECT_URI, ...options });
  return { request, url, journey };
}

/** The request with the suite's defaults, then authorize(). */
export function authorizeWith(ctx: ModuleContext, session: Session, requestOptions: RequestOptions = {}, options: AuthorizeOptions = {}): Promise<FrontChannel> {
  return authorize(ctx, session, authorizationRequest(session, requestOptions), options);
}

/**
 * The parameters the OP sent back to the client, or the module stops: it showed a page instead, or
 * answered a request for response_mode=form_post in the URL (the suite reads a form post's body only).
 */
export function redirectParams(ctx: ModuleContext, front: FrontChannel): { url: URL; params: Record<string, string> } {
  const { landing } = front.journey;
  if (landing.kind !== 'redirect') {
    return ctx.fail(`expected the OP to redirect back to the client; it showed a ${pageSummary(landing)}`);
  }
  if (front.request.params.response_mode === 'form_post' && landing.posted === undefined) {
    return ctx.fail(`the request asked for response_mode=form_post, but the OP sent the browser to ${landing.url.origin}${landing.url.pathname} with the answer in the URL`);
  }
  // RejectAuthCodeInUrlQuery, RejectErrorInUrlQuery: a form post carries the answer in its body only.
  if (landing.posted !== undefined) {
    ctx.check(!landing.url.searchParams.has('code') && !landing.url.searchParams.has('error'), `the OP posted the answer to ${landing.url.href}, whose query also carries a code or an error`);
  }
  return { url: landing.url, params: callbackParams(landing) };
}

/**
 * AbstractOIDCCServerTest.onAuthorizationCallbackResponse: the redirect_uri's own query kept,
 * iss, no error, state; the code (the module stops without one).
 */
export function expectCode(ctx: ModuleContext, session: Session, front: FrontChannel): string {
  const { url, params } = redirectParams(ctx, front);
  checkRedirectQueryKept(ctx, url, front.request.params.redirect_uri ?? session.client.redirectUri);
  checkIss(ctx, params, session.provider);
  ctx.require(params.error === undefined, `The authorization was expected to succeed, but the server returned an error from the authorization endpoint: ${params.error}${params.error_description ? ` (${params.error_description})` : ''}`);
  checkState(ctx, params, front.request);
  ctx.require(typeof params.code === 'string' && params.code !== '', 'no code in the authorization response');
  return params.code;
}

export interface Tokens {
  token: TokenEndpointResponse;
  accessToken: AccessToken;
  idToken: IdToken;
  refreshToken?: string;
}

export type IdTokenChecks = (idToken: IdToken, tokens: Omit<Tokens, 'idToken'>) => Promise<void> | void;

/** PerformStandardIdTokenChecks against what the request sent. */
export function standardChecks(ctx: ModuleContext, session: Session, request: AuthorizationRequest): IdTokenChecks {
  return (idToken) => standardIdTokenChecks(ctx, session.provider, session.client, idToken, { nonce: request.nonce });
}

/**
 * requestAuthorizationCode(): 200, no error, access_token and token_type, a sane expires_in,
 * an id_token, then the module's ID token checks (the standard ones unless it says otherwise).
 */
export async function redeemCode(ctx: ModuleContext, session: Session, code: string, request: AuthorizationRequest, idTokenChecks?: IdTokenChecks): Promise<Tokens> {
  const token = await callTokenEndpoint(ctx, session.provider, session.client, authorizationCodeGrant(session.client, code, request.codeVerifier));
  return acceptTokenResponse(ctx, token, idTokenChecks ?? standardChecks(ctx, session, request));
}

async function acceptTokenResponse(ctx: ModuleContext, token: TokenEndpointResponse, idTokenChecks: IdTokenChecks): Promise<Tokens> {
  const { response, body, exchange } = token;
  ctx.require(response.status === 200, `the token endpoint answered ${response.status}, expected 200: ${response.text.slice(0, 300)}`, exchange);
  ctx.require(body !== undefined && body.error === undefined, `The token endpoint call was expected to succeed, but it returned an error response: ${response.text.slice(0, 300)}`, exchange);
  ctx.require(typeof body.access_token === 'string' && body.access_token !== '', 'access_token is missing or empty in token endpoint response', exchange);
  ctx.require(typeof body.token_type === 'string' && body.token_type !== '', 'token_type is missing or empty in token endpoint response', exchange);
  if (body.expires_in !== undefined) checkExpiresIn(ctx, body.expires_in);
  const accessToken = { value: body.access_token, type: body.token_type };
  const refreshToken = typeof body.refresh_token === 'string' ? body.refresh_token : undefined;
  const idToken = parseIdToken(ctx, body.id_token);
  await idTokenChecks(idToken, { token, accessToken, refreshToken });
  return { token, accessToken, idToken, refreshToken };
}

/** ValidateExpiresIn. */
function checkExpiresIn(ctx: ModuleContext, expiresIn: unknown): void {
  if (!ctx.check(typeof expiresIn === 'number', `expires_in is not a number (${JSON.stringify(expiresIn)}) (RFC6749-5.1)`)) return;
  ctx.check((expiresIn as number) > 0, 'expires_in must be positive (RFC6749-5.1)');
  ctx.check((expiresIn as number) <= 31_536_000, 'expires_in is unreasonably large (more than a year): milliseconds instead of seconds? (RFC6749-5.1)');
}

/** at_hash and c_hash are optional in the token endpoint's id_token, but if present must be right. */
export function checkTokenEndpointHashes(ctx: ModuleContext, idToken: IdToken, accessToken: AccessToken, code: string): void {
  checkHashClaim(ctx, idToken, 'at_hash', accessToken.value);
  checkHashClaim(ctx, idToken, 'c_hash', code);
}

/** requestProtectedResource(): the access token works at the userinfo endpoint (GET, 200). */
export async function requestProtectedResource(ctx: ModuleContext, session: Session, tokens: Tokens): Promise<void> {
  const response = await callUserinfo(ctx, session.provider, tokens.accessToken, 'get');
  checkUserinfoStatus(ctx, response);
}

export interface HappyFlow {
  front: FrontChannel;
  code: string;
  tokens: Tokens;
}

export interface HappyFlowOptions {
  request?: RequestOptions;
  authorize?: AuthorizeOptions;
  idTokenChecks?: (session: Session, request: AuthorizationRequest) => IdTokenChecks;
}

/** AbstractOIDCCServerTest's whole flow: authorize, code, tokens, ID token checks, userinfo. */
export async function happyFlow(ctx: ModuleContext, session: Session, options: HappyFlowOptions = {}): Promise<HappyFlow> {
  const front = await authorizeWith(ctx, session, options.request, options.authorize);
  const code = expectCode(ctx, session, front);
  const checks = options.idTokenChecks?.(session, front.request) ?? standardChecks(ctx, session, front.request);
  const tokens = await redeemCode(ctx, session, code, front.request, checks);
  await requestProtectedResource(ctx, session, tokens);
  return { front, code, tokens };
}

/**
 * An authorization with prompt=none (and a 128-character state, to check the OP does not corrupt
 * it) for a browser no one is signed in on: a redirect back with an error that needs the user
 * (CheckErrorFromAuthorizationEndpointIsOneThatRequiredAUserInterface).
 */
export async function expectUserNeeded(ctx: ModuleContext, session: Session): Promise<void> {
  const request = authorizationRequest(session, { stateLength: 128, extra: { prompt: 'none' } });
  const front = await authorize(ctx, session, request, { stopAtLogin: true });
  const { params } = redirectParams(ctx, front);
  checkErrorResponse(ctx, params, request, session.provider);
  checkErrorCode(ctx, params, ['interaction_required', 'login_required', 'account_selection_required', 'consent_required'], 'OIDCC-3.1.2.6');
}
