import type { ModuleContext } from '../context.ts';
import type { ConformanceModule } from '../module.ts';

/** FAPI 2.0 plan modules this runner does not re-create: listed so the report shows the whole plan. */
function notReCreated(name: string, why: string): ConformanceModule {
  return {
    name,
    summary: `not re-created here: ${why}`,
    async run(ctx: ModuleContext) {
      ctx.notRun(`not re-created here: ${why}; run it with the OpenID Foundation's suite`);
    },
  };
}

export const fapi2ClaimsParameterIdentityClaims = notReCreated(
  'fapi2-security-profile-final-test-claims-parameter-identity-claims',
  'it compares every identity claim asked for with the claims parameter against what the userinfo endpoint returns for the DPoP-bound token',
);
