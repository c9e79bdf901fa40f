import type { ModuleContext } from '../context.ts';
import { authorizationCodeGrant, callTokenEndpoint } from '../client/token_endpoint.ts';
import { callUserinfo } from '../client/userinfo.ts';
import { checkInvalidGrant } from '../checks/token_error.ts';
import { happyFlow, setUp } from '../flows/code_flow.ts';
import { sleep } from '../flows/two_authorizations.ts';
import type { ConformanceModule } from '../module.ts';

/** AbstractOIDCCAuthCodeReuse: the happy flow, then the same code redeemed again. */
async function redeemTwice(ctx: ModuleContext, name: string, delayMs: number) {
  const session = await setUp(ctx, name);
  const flow = await happyFlow(ctx, session);
  await sleep(delayMs);
  const second = await callTokenEndpoint(ctx, session.provider, session.client, authorizationCodeGrant(session.client, flow.code, flow.front.request.codeVerifier));
  return { session, flow, second };
}

export const codeReuse: ConformanceModule = {
  name: 'oidcc-codereuse',
  summary: 'the code redeemed a second time at once: 400 invalid_grant (a second success is a warning)',
  async run(ctx: ModuleContext) {
    const { second } = await redeemTwice(ctx, this.name, 0);
    if (second.response.status === 200) {
      ctx.warn(false, 'Server has incorrectly allowed a second use of an authorization code; an authorization code is expected to be single use');
      return;
    }
    checkInvalidGrant(ctx, second);
  },
};

export const codeReuse30Seconds: ConformanceModule = {
  name: 'oidcc-codereuse-30seconds',
  summary: 'the code redeemed again 30 s later: 400 invalid_grant; the first access token should then be refused (a warning)',
  slow: true,
  async run(ctx: ModuleContext) {
    const { session, flow, second } = await redeemTwice(ctx, this.name, 30_000);
    checkInvalidGrant(ctx, second);
    const userinfo = await callUserinfo(ctx, session.provider, flow.tokens.accessToken, 'get');
    ctx.warn(userinfo.status >= 400 && userinfo.status < 500, `the access token issued for the reused code still works at the userinfo endpoint (${userinfo.status}); RFC 6749 4.1.2: the OP SHOULD revoke tokens issued from a reused code`);
  },
};
