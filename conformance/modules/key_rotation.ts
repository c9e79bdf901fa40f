import type { ModuleContext } from '../context.ts';
import { discover } from '../client/provider.ts';
import { checkServerJwks } from '../checks/jwks.ts';
import type { ConformanceModule } from '../module.ts';

/**
 * OIDCCServerRotateKeys: the suite fetches the JWKS, waits for the operator to rotate the OP's
 * signing keys, fetches it again and expects a new signing key (and, as a warning, the old one
 * still there). Rotation is an operator action this runner cannot trigger, so it checks the
 * current JWKS as the suite does before rotation and reports the rest as the operator's to do.
 */
export const serverRotateKeys: ConformanceModule = {
  name: 'oidcc-server-rotate-keys',
  summary: 'the JWKS before and after the operator rotates the signing keys: a new key, the old one kept',
  async run(ctx: ModuleContext) {
    const provider = await discover(ctx);
    await checkServerJwks(ctx, provider.jwks, { requireKids: true });
    const kids = (provider.jwks.keys ?? []).map((key) => key.kid).join(', ');
    ctx.operatorAction(`rotate the OP's signing keys (the key rotation of the operations issue), then compare ${provider.metadata.jwks_uri}: it must have a new signing key and should keep the old ones (now: ${kids}); or self-assert key rotation in the certification application`);
  },
};
