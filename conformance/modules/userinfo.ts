import { decodeJwt, decodeProtectedHeader } from 'jose';

import type { ModuleContext } from '../context.ts';
import { signatureProblem } from '../client/id_token.ts';
import { stringList } from '../client/provider.ts';
import { callUserinfo, type UserinfoMethod } from '../client/userinfo.ts';
import { checkUserinfoBody, checkUserinfoStatus } from '../checks/userinfo.ts';
import { happyFlow, setUp, type Session, type Tokens } from '../flows/code_flow.ts';
import { mediaType, type HttpResponse } from '../http/http_client.ts';
import type { ConformanceModule } from '../module.ts';

/** AbstractOIDCCUserInfoTest: the happy flow, then the userinfo endpoint called one way and its answer checked. */
function userinfoTest(name: string, summary: string, method: UserinfoMethod): ConformanceModule {
  return {
    name,
    summary,
    async run(ctx: ModuleContext) {
      const session = await setUp(ctx, name);
      const { tokens } = await happyFlow(ctx, session);
      const response = await callUserinfo(ctx, session.provider, tokens.accessToken, method);
      if (method === 'post-body' && (response.status < 200 || response.status > 299)) {
        // OIDCCUserInfoPostBody: the token in the body is optional (RFC 6750 2.2), so a refusal is a warning.
        ctx.warn(false, `the userinfo endpoint answered ${response.status} to the access token in a POST body: it does not appear to support it`);
        return;
      }
      if (method !== 'post-body') checkUserinfoStatus(ctx, response);
      checkUserinfoBody(ctx, response);
    },
  };
}

export const userinfoGet = userinfoTest('oidcc-userinfo-get', 'GET the userinfo endpoint with the token in the Authorization header', 'get');
export const userinfoPostHeader = userinfoTest('oidcc-userinfo-post-header', 'POST to the userinfo endpoint with the token in the Authorization header', 'post-header');
export const userinfoPostBody = userinfoTest('oidcc-userinfo-post-body', 'POST to the userinfo endpoint with the token in the form body (a refusal is a warning)', 'post-body');

export const userinfoRs256: ConformanceModule = {
  name: 'oidcc-userinfo-rs256',
  summary: 'userinfo_signed_response_alg=RS256 registered: the userinfo response must be an RS256-signed JWT',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name, { registration: { userinfo_signed_response_alg: 'RS256' } });
    // OIDCCUserInfoRS256.onConfigure: a failure, not a skip, when the OP does not list RS256.
    const algs = stringList(session.provider.metadata, 'userinfo_signing_alg_values_supported');
    ctx.check(algs?.includes('RS256') ?? false, `RS256 is not listed in userinfo_signing_alg_values_supported (${algs ? JSON.stringify(algs) : 'absent from the discovery document'}) (OIDCD-3)`, session.provider.discoveryExchange);
    const { tokens } = await happyFlow(ctx, session);
    await checkSignedUserinfo(ctx, session, tokens);
  },
};

/** OIDCCUserInfoRS256.extractUserInfoResponse: application/jwt, signed by the OP with RS256, no nonce. */
async function checkSignedUserinfo(ctx: ModuleContext, session: Session, tokens: Tokens): Promise<void> {
  const response: HttpResponse = await callUserinfo(ctx, session.provider, tokens.accessToken, 'get');
  checkUserinfoStatus(ctx, response);
  ctx.check(mediaType(response) === 'application/jwt', `the userinfo response's Content-Type is ${response.headers.get('content-type')}, expected application/jwt (OIDCC-5.3.2)`);
  let alg: string | undefined;
  try {
    alg = decodeProtectedHeader(response.text).alg;
  } catch (error) {
    ctx.fail(`the userinfo response is not a JWT: ${error instanceof Error ? error.message : String(error)} (OIDCC-5.3.2)`);
  }
  const problem = await signatureProblem(response.text, session.provider);
  ctx.check(problem === undefined, `the userinfo response's signature does not verify with the OP's keys: ${problem} (OIDCC-5.3.2)`);
  ctx.check(alg === 'RS256', `the userinfo response is signed with ${alg}, expected RS256`);
  const claims = decodeJwt(response.text);
  ctx.check(claims.nonce === undefined, 'the signed userinfo response contains a nonce (OIDCC-5.3.2)');
  ctx.warn(claims.iss === session.provider.metadata.issuer && (Array.isArray(claims.aud) ? claims.aud : [claims.aud]).includes(session.client.clientId), 'the signed userinfo response should carry iss (the issuer) and aud (the client) (OIDCC-5.3.2)');
}
