import type { ModuleContext } from '../context.ts';
import { expectUserNeeded, setUp } from '../flows/code_flow.ts';
import { checkLaterAuthentication, checkSameAuthentication, firstFlow, secondFlow, sleep } from '../flows/two_authorizations.ts';
import type { ConformanceModule } from '../module.ts';

export const promptLogin: ConformanceModule = {
  name: 'oidcc-prompt-login',
  summary: 'a second authorization with prompt=login must ask the user to sign in again; a later auth_time if present',
  review: 'the suite asks for a screenshot of the second login page; this runner checks that the OP served its login form again',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    const first = await firstFlow(ctx, session);
    await sleep(1000); // WaitForOneSecond: so auth_time can differ
    const second = await secondFlow(ctx, session, { extra: { prompt: 'login' } }, true);
    checkLaterAuthentication(ctx, first.idToken, second.idToken);
  },
};

export const promptNoneNotLoggedIn: ConformanceModule = {
  name: 'oidcc-prompt-none-not-logged-in',
  summary: 'prompt=none with no session: a redirect back with login_required, interaction_required, account_selection_required or consent_required',
  async run(ctx: ModuleContext) {
    await expectUserNeeded(ctx, await setUp(ctx, this.name));
  },
};

export const promptNoneLoggedIn: ConformanceModule = {
  name: 'oidcc-prompt-none-logged-in',
  summary: 'a second authorization with prompt=none must succeed without interaction; same sub and auth_time',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    const first = await firstFlow(ctx, session);
    const second = await secondFlow(ctx, session, { extra: { prompt: 'none' } }, false);
    checkSameAuthentication(ctx, first.idToken, second.idToken);
  },
};

export const idTokenHint: ConformanceModule = {
  name: 'oidcc-id-token-hint',
  summary: 'a second authorization with prompt=none and id_token_hint (the first ID token) must succeed without interaction',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    const first = await firstFlow(ctx, session);
    const second = await secondFlow(ctx, session, { extra: { prompt: 'none', id_token_hint: first.idToken.raw } }, false);
    checkSameAuthentication(ctx, first.idToken, second.idToken);
  },
};
