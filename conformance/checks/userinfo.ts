import type { ModuleContext } from '../context.ts';
import { jsonObject, mediaType, type HttpResponse } from '../http/http_client.ts';
import { SCOPE_STANDARD_CLAIMS, standardClaimProblems, updatedAtProblem } from './standard_claims.ts';

/** EnsureHttpStatusCodeIs200 for the userinfo call. */
export function checkUserinfoStatus(ctx: ModuleContext, response: HttpResponse): void {
  ctx.check(response.status === 200, `the userinfo endpoint answered ${response.status}, expected 200 (OIDCC-5.3.1)`);
}

/**
 * AbstractOIDCCUserInfoTest.extractUserInfoResponse and validateExtractedUserInfoResponse: JSON,
 * a JSON object, the standard claims' types, sub, updated_at, _claim_names/_claim_sources.
 */
export function checkUserinfoBody(ctx: ModuleContext, response: HttpResponse, options: { contentType: boolean } = { contentType: true }): Record<string, unknown> {
  const exchange = ctx.log.last();
  if (options.contentType) ctx.check(mediaType(response) === 'application/json', `the userinfo response's Content-Type is ${response.headers.get('content-type')}, expected application/json (OIDCC-5.3.2)`, exchange);
  const userinfo = jsonObject(response);
  ctx.require(userinfo !== undefined, 'UserInfo endpoint response is not a JSON object', exchange);
  for (const problem of standardClaimProblems(userinfo)) ctx.check(false, `Userinfo is not valid: ${problem} (OIDCC-5.1)`, exchange);
  ctx.check(typeof userinfo.sub === 'string' && userinfo.sub !== '', 'sub not found in userinfo (OIDCC-5.3.2)', exchange);
  const updatedAt = updatedAtProblem(userinfo, 'userinfo');
  ctx.check(updatedAt === undefined, `${updatedAt} (OIDCC-5.1)`, exchange);
  checkClaimSources(ctx, userinfo);
  return userinfo;
}

/** EnsureMemberValuesInClaimNameReferenceToMemberNamesInClaimSources (OIDCC 5.6.2). */
function checkClaimSources(ctx: ModuleContext, userinfo: Record<string, unknown>): void {
  const names = userinfo._claim_names;
  const sources = userinfo._claim_sources;
  if (names === undefined && sources === undefined) return;
  if (!ctx.check(names !== undefined && sources !== undefined, "userinfo has only one of '_claim_names' and '_claim_sources' (OIDCC-5.6.2)")) return;
  const referenced = new Set(Object.values(names as Record<string, unknown>).map(String));
  for (const source of Object.keys(sources as Record<string, unknown>)) {
    ctx.check(referenced.has(source), `Member name '${source}' in userinfo '_claim_sources' is not referenced by '_claim_names' (OIDCC-5.6.2)`);
  }
}

/** VerifyUserInfoAndIdTokenInTokenEndpointSameSub. */
export function checkSameSub(ctx: ModuleContext, userinfo: Record<string, unknown>, idTokenSub: unknown): void {
  ctx.check(userinfo.sub === idTokenSub, `the userinfo sub ${JSON.stringify(userinfo.sub)} is not the id_token's ${JSON.stringify(idTokenSub)} (OIDCC-5.3.2)`);
}

/** VerifyScopesReturnedInUserInfoClaims: every claim the requested scopes stand for (a warning). */
export function warnMissingScopeClaims(ctx: ModuleContext, userinfo: Record<string, unknown>, scope: string): void {
  const expected = scope.split(' ').flatMap((value) => SCOPE_STANDARD_CLAIMS[value] ?? []);
  const missing = expected.filter((claim) => !(claim in userinfo));
  ctx.warn(missing.length === 0, `userinfo does not contain every claim of the requested scopes (${scope}); missing: ${missing.join(', ')} (OIDCC-5.4)`);
}
