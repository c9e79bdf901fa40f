import type { ModuleContext } from '../context.ts';
import type { RequestOptions } from '../client/authorization_request.ts';
import type { IdToken } from '../client/id_token.ts';
import { pageSummary } from '../checks/error_page.ts';
import { authorizeWith, expectCode, happyFlow, redeemCode, requestProtectedResource, standardChecks, type HappyFlowOptions, type IdTokenChecks, type Session, type Tokens } from './code_flow.ts';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The whole flow a second time in the same browser, with the module's change to the request. */
export async function secondFlow(ctx: ModuleContext, session: Session, request: RequestOptions, expectLogin: boolean, extraChecks?: IdTokenChecks): Promise<Tokens> {
  // A login page on a request that must not prompt is a failure; the user agent must not answer it.
  const front = await authorizeWith(ctx, session, request, { stopAtLogin: !expectLogin });
  if (expectLogin) {
    const login = front.journey.pages.find((page) => page.kind === 'login');
    ctx.check(login !== undefined, `the OP did not ask the user to sign in again (${JSON.stringify(request.extra)}); it went straight to ${pageSummary(front.journey.landing)}`);
    if (login) ctx.note(`read instead of a screenshot: the second authorization showed the login form (${login.url})`);
  } else if (front.journey.pages.some((page) => page.kind === 'login')) {
    ctx.fail(`the OP showed its login page for a request that must not interact with the user (${JSON.stringify(request.extra)})`);
  }
  const code = expectCode(ctx, session, front);
  const tokens = await redeemCode(ctx, session, code, front.request, async (idToken, rest) => {
    await standardChecks(ctx, session, front.request)(idToken, rest);
    await extraChecks?.(idToken, rest);
  });
  await requestProtectedResource(ctx, session, tokens);
  return tokens;
}

export function firstFlow(ctx: ModuleContext, session: Session, options: HappyFlowOptions = {}): Promise<Tokens> {
  return happyFlow(ctx, session, options).then((flow) => flow.tokens);
}

/** CheckIdTokenAuthTimeClaimsSameIfPresent and CheckIdTokenSubConsistentForSecondAuthorization. */
export function checkSameAuthentication(ctx: ModuleContext, first: IdToken, second: IdToken): void {
  const [a, b] = [first.claims.auth_time, second.claims.auth_time];
  if (a !== undefined && b !== undefined) ctx.check(a === b, `The id_tokens contain different auth_time claims (${a}, ${b}), but must contain the same auth_time (OIDCC-2)`);
  ctx.check(first.claims.sub === second.claims.sub, `The id_token from the first and second authorization contain different sub claims (${first.claims.sub}, ${second.claims.sub}) (OIDCC-2)`);
}

/** CheckSecondIdTokenAuthTimeIsLaterIfPresent. */
export function checkLaterAuthentication(ctx: ModuleContext, first: IdToken, second: IdToken): void {
  const [a, b] = [first.claims.auth_time, second.claims.auth_time];
  if (typeof a !== 'number' || typeof b !== 'number') return;
  ctx.check(a !== b, `the server was required to re-authenticate the user, but the second id_token has the same auth_time (${a}) as the first (OIDCC-2)`);
  ctx.check(a <= b, `the second id_token has an earlier auth_time (${b}) than the first (${a}) (OIDCC-2)`);
}

/** CheckIdTokenAuthTimeClaimPresentDueToMaxAge. */
export function checkAuthTimePresent(ctx: ModuleContext, idToken: IdToken): void {
  ctx.check(idToken.claims.auth_time !== undefined, 'auth_time claim is missing from the id_token, but it is required for an authentication where the max_age parameter was used (OIDCC-3.1.2.1)');
}
