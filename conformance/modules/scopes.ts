import type { ModuleContext } from '../context.ts';
import { stringList } from '../client/provider.ts';
import { callUserinfo } from '../client/userinfo.ts';
import { checkSameSub, checkUserinfoBody, checkUserinfoStatus, warnMissingScopeClaims } from '../checks/userinfo.ts';
import { warnNameInIdToken } from '../checks/id_token_extras.ts';
import { happyFlow, setUp, type HappyFlow, type HappyFlowOptions, type Session } from '../flows/code_flow.ts';
import type { ConformanceModule } from '../module.ts';

/** OIDCCCheckScopesSupportedContainScopeTest: the suite skips a scope test the OP does not list. */
function skipUnlistedScopes(ctx: ModuleContext, session: Session, scope: string): void {
  const listed = stringList(session.provider.metadata, 'scopes_supported');
  const missing = scope.split(' ').filter((value) => !listed?.includes(value));
  if (missing.length > 0) ctx.notSupported(`scopes_supported (${JSON.stringify(listed)}) does not list ${missing.join(', ')}`);
}

/**
 * AbstractOIDCCReturnedClaimsServerTest: after the flow the userinfo endpoint is called again and
 * its claims checked, the sub the same as the ID token's; missing scope claims are a warning.
 */
export async function returnedClaims(ctx: ModuleContext, session: Session, flow: HappyFlow, scope: string): Promise<Record<string, unknown>> {
  const response = await callUserinfo(ctx, session.provider, flow.tokens.accessToken, 'get');
  checkUserinfoStatus(ctx, response);
  const userinfo = checkUserinfoBody(ctx, response, { contentType: false });
  checkSameSub(ctx, userinfo, flow.tokens.idToken.claims.sub);
  warnMissingScopeClaims(ctx, userinfo, scope);
  return userinfo;
}

/** The scope-email checks OIDCCScopeEmail adds (all warnings). */
function emailScopeWarnings(ctx: ModuleContext, flow: HappyFlow, userinfo: Record<string, unknown>): void {
  warnNameInIdToken(ctx, flow.tokens.idToken);
  ctx.warn(flow.tokens.idToken.claims.email === undefined, 'Unexpectedly found email in id_token: scope=email asks for it at the userinfo endpoint (OIDCC-5.4)');
  ctx.warn(userinfo.name === undefined, 'Unexpectedly found name in the userinfo response: it was not requested (OIDCC-5.5)');
}

function scopeTest(name: string, scope: string, options: { email?: boolean; flow?: HappyFlowOptions['authorize'] } = {}): ConformanceModule {
  return {
    name,
    summary: `scope=${scope}: the claims of the scope at the userinfo endpoint (missing ones a warning); skipped when scopes_supported lacks one`,
    async run(ctx: ModuleContext) {
      const session = await setUp(ctx, name);
      skipUnlistedScopes(ctx, session, scope);
      const flow = await happyFlow(ctx, session, { request: { scope }, authorize: options.flow });
      const userinfo = await returnedClaims(ctx, session, flow, scope);
      if (options.email) emailScopeWarnings(ctx, flow, userinfo);
    },
  };
}

export const scopeProfile = scopeTest('oidcc-scope-profile', 'openid profile');
export const scopeEmail = scopeTest('oidcc-scope-email', 'openid email', { email: true });
export const scopeAddress = scopeTest('oidcc-scope-address', 'openid address');
export const scopePhone = scopeTest('oidcc-scope-phone', 'openid phone');
export const scopeAll = scopeTest('oidcc-scope-all', 'openid email phone address profile');

/** OIDCCAlternateHappyFlow: OIDCCScopeEmail with the scope reversed and the parameters in reverse order. */
export const alternateHappyFlow: ConformanceModule = {
  ...scopeTest('oidcc-alternate-happy-flow', 'email openid', { email: true, flow: { order: 'reversed' } }),
  summary: 'scope "email openid" and the query parameters in reverse order: the OP must not depend on ordering (RFC 6749 3.3); skipped when email is not listed',
};
