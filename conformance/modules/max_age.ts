import type { ModuleContext } from '../context.ts';
import { checkAuthTimePresent, checkLaterAuthentication, checkSameAuthentication, firstFlow, secondFlow, sleep } from '../flows/two_authorizations.ts';
import { setUp, standardChecks } from '../flows/code_flow.ts';
import type { ConformanceModule } from '../module.ts';

const SKEW_SECONDS = 300;

export const maxAge1: ConformanceModule = {
  name: 'oidcc-max-age-1',
  summary: 'a second authorization 2 s later with max_age=1 must ask the user to sign in again and return a recent, later auth_time',
  review: 'the suite asks for a screenshot of the second login page; this runner checks that the OP served its login form again',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    const first = await firstFlow(ctx, session);
    await sleep(2000); // WaitFor2Seconds: the first authentication is then older than max_age
    await secondFlow(ctx, session, { extra: { max_age: '1' } }, true, (idToken) => {
      checkAuthTimePresent(ctx, idToken);
      checkLaterAuthentication(ctx, first.idToken, idToken);
      const authTime = idToken.claims.auth_time;
      if (typeof authTime === 'number') {
        ctx.check(authTime >= Date.now() / 1000 - SKEW_SECONDS - 1, `id_token auth_time ${authTime} is older than 1 second (allowing 5 minutes' skew) (OIDCC-2)`);
      }
    });
  },
};

export const maxAge10000: ConformanceModule = {
  name: 'oidcc-max-age-10000',
  summary: 'max_age=15000, then max_age=10000: no second sign-in, auth_time present both times and the same',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    const first = await firstFlow(ctx, session, {
      request: { extra: { max_age: '15000' } },
      idTokenChecks: (s, request) => async (idToken, rest) => {
        await standardChecks(ctx, s, request)(idToken, rest);
        checkAuthTimePresent(ctx, idToken);
      },
    });
    const second = await secondFlow(ctx, session, { extra: { max_age: '10000' } }, false, (idToken) => checkAuthTimePresent(ctx, idToken));
    checkSameAuthentication(ctx, first.idToken, second.idToken);
  },
};
