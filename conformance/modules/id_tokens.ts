import type { ModuleContext } from '../context.ts';
import { stringList } from '../client/provider.ts';
import { checkAlg, checkKid } from '../checks/id_token_extras.ts';
import { happyFlow, setUp, standardChecks, type HappyFlowOptions } from '../flows/code_flow.ts';
import type { ConformanceModule } from '../module.ts';

/** The ID token checks of both RS256 modules: a kid, RS256, then every standard check. */
function rs256WithKid(ctx: ModuleContext): NonNullable<HappyFlowOptions['idTokenChecks']> {
  return (s, request) => async (idToken, rest) => {
    checkKid(ctx, idToken);
    checkAlg(ctx, idToken, 'RS256');
    await standardChecks(ctx, s, request)(idToken, rest);
  };
}

export const idTokenSignature: ConformanceModule = {
  name: 'oidcc-idtoken-signature',
  summary: 'no id_token_signed_response_alg registered: the ID token must default to RS256 and carry a kid',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    await happyFlow(ctx, session, {
      idTokenChecks: rs256WithKid(ctx),
    });
  },
};

export const idTokenRs256: ConformanceModule = {
  name: 'oidcc-idtoken-rs256',
  summary: 'id_token_signed_response_alg=RS256 registered: the ID token must be RS256 with a kid',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name, { registration: { id_token_signed_response_alg: 'RS256' } });
    await happyFlow(ctx, session, {
      idTokenChecks: rs256WithKid(ctx),
    });
  },
};

export const idTokenUnsigned: ConformanceModule = {
  name: 'oidcc-idtoken-unsigned',
  summary: 'id_token_signed_response_alg=none registered: the ID token must be unsigned; skipped when discovery does not list none',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name, {
      registration: { id_token_signed_response_alg: 'none' },
      beforeRegister: (provider) => {
        if (!(stringList(provider.metadata, 'id_token_signing_alg_values_supported') ?? []).includes('none')) {
          ctx.notSupported("id_token_signing_alg_values_supported does not list 'none'; servers are not required to support unsigned ID tokens");
        }
      },
    });
    await happyFlow(ctx, session, { idTokenChecks: () => (idToken) => checkAlg(ctx, idToken, 'none') });
  },
};
