import type { ModuleContext } from '../context.ts';
import { sleep } from '../flows/two_authorizations.ts';
import { authorizeByReference, checkAuthorizationError, checkEndpointError, fapiCode, fapiRequest, fapiSetUp, push, redeem } from '../flows/fapi2_flow.ts';
import type { ConformanceModule } from '../module.ts';

/** Modules that wait for something to expire, as the suite does: started first (slow). */

export const fapi2ExpiredCode: ConformanceModule = {
  name: 'fapi2-security-profile-final-ensure-token-endpoint-fails-with-expired-auth-code',
  summary: 'the code redeemed for the first time 62 s after it was issued (FAPI 2.0: codes live at most 60 s): 400 invalid_grant',
  slow: true,
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session);
    const code = await fapiCode(ctx, session, request);
    await sleep(62_000);
    const answer = await redeem(ctx, session, code, request);
    ctx.check(answer.response.status !== 200, 'the OP accepted an authorization code more than 60 s old (FAPI2-SP-FINAL-5.3.2.1-11)', answer.exchange);
    checkEndpointError(ctx, answer, [400], ['invalid_grant'], 'RFC6749-5.2');
  },
};

export const fapi2ExpiredRequestUri: ConformanceModule = {
  name: 'fapi2-security-profile-final-par-attempt-to-use-expired-request_uri',
  summary: 'the request_uri used after its expires_in (at most 30 minutes is waited for): invalid_request_uri or an error page',
  slow: true,
  async run(ctx: ModuleContext) {
    const session = await fapiSetUp(ctx, this.name);
    const request = fapiRequest(session);
    const pushed = await push(ctx, session, request);
    ctx.require(pushed.response.status === 201 && typeof pushed.body?.request_uri === 'string', `the PAR endpoint answered ${pushed.response.status}, expected 201 (PAR-2.2)`);
    const expiresIn = typeof pushed.body.expires_in === 'number' ? pushed.body.expires_in : 60;
    if (expiresIn > 1800) ctx.notSupported('The expires in value is longer than 30 minutes so is too long for the suite to wait for it to expire.');
    await sleep((expiresIn + 2) * 1000);
    const journey = await authorizeByReference(ctx, session, pushed.body.request_uri);
    checkAuthorizationError(ctx, session, journey, undefined, ['invalid_request_uri'], 'PAR-2.2');
  },
};
