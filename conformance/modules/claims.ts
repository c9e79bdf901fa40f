import type { ModuleContext } from '../context.ts';
import { stringList } from '../client/provider.ts';
import { happyFlow, setUp, standardChecks } from '../flows/code_flow.ts';
import type { ConformanceModule } from '../module.ts';
import { returnedClaims } from './scopes.ts';

/**
 * OIDCCClaimsEssential: the claims request parameter (OIDCC 5.5) asks for name at the userinfo
 * endpoint as essential; the request must succeed, and a missing name is a warning.
 */
export const claimsEssential: ConformanceModule = {
  name: 'oidcc-claims-essential',
  summary: 'claims={"userinfo":{"name":{"essential":true}}}: the request must succeed; no name at userinfo is a warning',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    const claims = JSON.stringify({ userinfo: { name: { essential: true } } });
    const flow = await happyFlow(ctx, session, { request: { extra: { claims } } });
    const userinfo = await returnedClaims(ctx, session, flow, 'openid');
    ctx.warn(typeof userinfo.name === 'string' && userinfo.name !== '', 'name not found in userinfo although it was requested as an essential claim (OIDCC-5.5)');
    ctx.warn(flow.tokens.idToken.claims.name === undefined, 'Unexpectedly found name in id_token: it was requested at the userinfo endpoint only (OIDCC-5.5)');
  },
};

/**
 * OIDCCEnsureRequestWithAcrValuesSucceeds: acr_values with every value of acr_values_supported
 * (or "1 2" when none are listed) must not cause an error; an ID token without one of them as acr
 * is a warning (OIDCC 3.1.2.1: support may be no more than not failing).
 */
export const acrValues: ConformanceModule = {
  name: 'oidcc-ensure-request-with-acr-values-succeeds',
  summary: 'acr_values (acr_values_supported, or "1 2") must not cause an error; no requested acr in the ID token is a warning',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    const acrValuesRequested = stringList(session.provider.metadata, 'acr_values_supported')?.join(' ') ?? '1 2';
    await happyFlow(ctx, session, {
      request: { extra: { acr_values: acrValuesRequested } },
      idTokenChecks: (s, request) => async (idToken, rest) => {
        await standardChecks(ctx, s, request)(idToken, rest);
        const { acr } = idToken.claims;
        ctx.warn(typeof acr === 'string' && acrValuesRequested.split(' ').includes(acr), `the id_token's acr (${JSON.stringify(acr)}) is not one of the requested acr_values "${acrValuesRequested}"; OIDCC 3.1.2.1 says the OP SHOULD return one`);
      },
    });
  },
};
