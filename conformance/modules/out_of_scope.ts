import type { ModuleContext } from '../context.ts';
import type { ConformanceModule } from '../module.ts';

/**
 * Dynamic-plan modules this runner does not re-create: each needs client-side keys the OP must
 * trust, or a document the OP fetches from the client. Listed so the report shows the whole
 * plan and says what is left for the real suite.
 */
function outOfScope(name: string, needs: string): ConformanceModule {
  return {
    name,
    summary: `not re-created here: it needs ${needs}`,
    async run(ctx: ModuleContext) {
      ctx.notRun(`needs ${needs}; run it with the OpenID Foundation's suite`);
    },
  };
}

export const registrationJwksUri = outOfScope('oidcc-registration-jwks-uri', 'client keys published at a jwks_uri the OP fetches, and private_key_jwt');
export const registrationSectorUri = outOfScope('oidcc-registration-sector-uri', 'a sector_identifier_uri document the OP fetches');
export const registrationSectorBad = outOfScope('oidcc-registration-sector-bad', 'a sector_identifier_uri document the OP fetches');
export const refreshTokenRpKeyRotation = outOfScope('oidcc-refresh-token-rp-key-rotation', 'private_key_jwt client authentication with rotated client keys');
export const requestUriUnsigned = outOfScope('oidcc-request-uri-unsigned', 'a request object hosted at a request_uri the OP fetches');
export const requestUriSignedRs256 = outOfScope('oidcc-request-uri-signed-rs256', 'a signed request object (client keys) hosted at a request_uri the OP fetches');
export const clientAssertionIssAud = outOfScope('oidcc-ensure-client-assertion-with-iss-aud-succeeds', 'private_key_jwt client authentication (client keys)');
