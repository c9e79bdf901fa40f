import type { ModuleContext } from '../context.ts';
import { stringList } from '../client/provider.ts';
import { parseIdToken, type IdToken } from '../client/id_token.ts';
import { callTokenEndpoint, type TokenEndpointResponse } from '../client/token_endpoint.ts';
import { MINIMUM_ENTROPY_BITS, MINIMUM_LENGTH_BITS, lengthBits, shannonBits } from '../checks/entropy.ts';
import { checkInvalidGrant } from '../checks/token_error.ts';
import { authorizeWith, expectCode, redeemCode, requestProtectedResource, setUp, type Session, type Tokens } from '../flows/code_flow.ts';
import { sleep } from '../flows/two_authorizations.ts';
import { mediaType } from '../http/http_client.ts';
import type { ConformanceModule } from '../module.ts';

const VSCHAR = /^[\x20-\x7e]+$/;

/**
 * OIDCCRefreshToken: two clients, each through the code flow and a refresh (client 1 sending the
 * scope again); then client 2's refresh token used by client 1 must be refused with invalid_grant.
 * No refresh token issued: skipped.
 */
export const refreshToken: ConformanceModule = {
  name: 'oidcc-refresh-token',
  summary: 'refresh works and is bound to its client (client 2\'s refresh token refused to client 1); skipped when no refresh token is issued',
  async run(ctx: ModuleContext) {
    const registration = { grant_types: ['authorization_code', 'refresh_token'] };
    const first = await setUp(ctx, this.name, { registration });
    const scope = scopeFor(first);
    await flowAndRefresh(ctx, first, scope, { sendScope: true });
    // The second client runs in the same browser, as in the suite.
    const second = { ...(await setUp(ctx, `${this.name} client2`, { registration })), agent: first.agent };
    const secondRefresh = await flowAndRefresh(ctx, second, scope, { sendScope: false, nonceLength: 43 });
    const crossed = await callTokenEndpoint(ctx, first.provider, first.client, { grant_type: 'refresh_token', refresh_token: secondRefresh, scope });
    ctx.require(typeof crossed.body?.error === 'string', `client 1 presenting client 2's refresh token got no error (status ${crossed.response.status})`, crossed.exchange);
    checkInvalidGrant(ctx, crossed);
  },
};

/** SetScopeInClientConfigurationToOpenIdOfflineAccessIfServerSupportsOfflineAccess. */
function scopeFor(session: Session): string {
  return stringList(session.provider.metadata, 'scopes_supported')?.includes('offline_access') ? 'openid offline_access' : 'openid';
}

/** One client's code flow then refresh; returns the refresh token it holds at the end. */
async function flowAndRefresh(ctx: ModuleContext, session: Session, scope: string, options: { sendScope: boolean; nonceLength?: number }): Promise<string> {
  const extra = scope.includes('offline_access') ? { prompt: 'consent' } : undefined;
  const front = await authorizeWith(ctx, session, { scope, nonceLength: options.nonceLength, extra });
  const code = expectCode(ctx, session, front);
  const tokens = await redeemCode(ctx, session, code, front.request);
  if (tokens.refreshToken === undefined) {
    ctx.warn(!stringList(session.provider.metadata, 'grant_types_supported')?.includes('refresh_token'), 'no refresh token was issued, yet grant_types_supported lists refresh_token (OIDCD-3)');
    ctx.notSupported('no refresh token was issued, so refresh tokens cannot be tested');
  }
  ctx.warn(stringList(session.provider.metadata, 'grant_types_supported')?.includes('refresh_token') ?? false, 'The server issued a refresh token but grant_types_supported does not list refresh_token (OIDCD-3)');
  ctx.check(VSCHAR.test(tokens.refreshToken), 'Refresh token contains characters outside %x20-7E (RFC6749-A.17)');
  const refreshed = await refresh(ctx, session, tokens, options.sendScope ? scope : undefined);
  return refreshed ?? tokens.refreshToken;
}

/** RefreshTokenRequestSteps; returns the new refresh token when one is issued. */
async function refresh(ctx: ModuleContext, session: Session, tokens: Tokens, scope: string | undefined): Promise<string | undefined> {
  await sleep(1000); // WaitForOneSecond: so the new tokens' iat differ
  const form: Record<string, string> = { grant_type: 'refresh_token', refresh_token: tokens.refreshToken!, ...(scope ? { scope } : {}) };
  const response = await callTokenEndpoint(ctx, session.provider, session.client, form);
  checkRefreshResponse(ctx, response);
  const body = response.body!;
  const accessToken = String(body.access_token);
  const idToken = body.id_token === undefined ? undefined : parseIdToken(ctx, body.id_token);
  if (idToken) compareIdTokens(ctx, tokens.idToken, idToken);
  await requestProtectedResource(ctx, session, { ...tokens, accessToken: { value: accessToken, type: String(body.token_type) } });
  const newRefreshToken = typeof body.refresh_token === 'string' ? body.refresh_token : undefined;
  if (newRefreshToken !== undefined) {
    ctx.check(lengthBits(newRefreshToken) >= MINIMUM_LENGTH_BITS, `Refresh token is not of sufficient length (${lengthBits(newRefreshToken)} bits) (RFC6749-10.10)`);
    ctx.check(shannonBits(newRefreshToken) > MINIMUM_ENTROPY_BITS, `the refresh token's estimated entropy is ${shannonBits(newRefreshToken).toFixed(0)} bits, required more than ${MINIMUM_ENTROPY_BITS} (RFC6749-10.10)`);
  }
  return newRefreshToken;
}

function checkRefreshResponse(ctx: ModuleContext, { response, body, exchange }: TokenEndpointResponse): void {
  ctx.check(response.status === 200, `the refresh request answered ${response.status}, expected 200 (RFC6749-5.1)`, exchange);
  ctx.check(mediaType(response) === 'application/json', `the refresh response's Content-Type is ${response.headers.get('content-type')}, expected application/json`, exchange);
  ctx.check(/(^|,)\s*no-store\s*(,|$)/.test(response.headers.get('cache-control') ?? ''), `'cache-control' header in token endpoint response does not contain no-store (${response.headers.get('cache-control')}) (RFC6749-5.1)`, exchange);
  ctx.require(body !== undefined && body.error === undefined, `The token endpoint call was expected to succeed, but it returned an error response: ${response.text.slice(0, 300)}`, exchange);
  ctx.require(typeof body.access_token === 'string' && body.access_token !== '', 'no access_token in the refresh response', exchange);
  ctx.check(typeof body.token_type === 'string' && body.token_type.toLowerCase() === 'bearer', `Token type is not bearer (${JSON.stringify(body.token_type)})`, exchange);
  ctx.check(shannonBits(body.access_token) > MINIMUM_ENTROPY_BITS, 'the access token\'s estimated entropy is too low', exchange);
  ctx.check(VSCHAR.test(body.access_token), 'Access token contains characters outside %x20-7E (RFC6749-A.12)', exchange);
  ctx.warn(body.expires_in !== undefined, 'expires_in is missing from the refresh response (RFC6749-5.1)');
  if (body.expires_in !== undefined) ctx.check(typeof body.expires_in === 'number' && body.expires_in > 0 && body.expires_in <= 31_536_000, `expires_in in the refresh response is not a sane number of seconds (${JSON.stringify(body.expires_in)})`, exchange);
}

/** CompareIdTokenClaims (OIDCC 12.2). */
function compareIdTokens(ctx: ModuleContext, first: IdToken, second: IdToken): void {
  for (const claim of ['iss', 'sub'] as const) {
    ctx.check(second.claims[claim] !== undefined && second.claims[claim] === first.claims[claim], `the refreshed id_token's ${claim} (${JSON.stringify(second.claims[claim])}) differs from the first (${JSON.stringify(first.claims[claim])}) (OIDCC-12.2)`);
  }
  ctx.check(second.claims.iat !== undefined && second.claims.iat !== first.claims.iat, 'iat for the refreshed id_token MUST represent the time it was issued, not the first id token\'s (OIDCC-12.2)');
  const audiences = (token: IdToken) => new Set(Array.isArray(token.claims.aud) ? token.claims.aud : [token.claims.aud]);
  const [a, b] = [audiences(first), audiences(second)];
  ctx.check(a.size === b.size && [...a].every((aud) => b.has(aud)), 'aud of the refreshed id_token MUST be the same as in the first (OIDCC-12.2)');
  if (second.claims.auth_time !== undefined) ctx.check(second.claims.auth_time === first.claims.auth_time, 'auth_time of the refreshed id_token MUST be that of the original authentication (OIDCC-12.2)');
  ctx.check(first.claims.azp !== undefined || second.claims.azp === undefined, 'the refreshed id_token has an azp claim the first did not (OIDCC-12.2)');
  if (first.claims.azp !== undefined) ctx.check(first.claims.azp === second.claims.azp, 'azp claims are not the same (OIDCC-12.2)');
}
