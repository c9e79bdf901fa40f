import type { PresentedInitialAccessToken } from '../clients/initial_access_tokens.ts';
import type { AuthorizationError } from '../engine/authorization_errors.ts';
import type { LogoutReturn } from '../interactions/logout_return.ts';
import type { Site } from '../pages/site.ts';
import type { Principal } from '../resource/principal.ts';
import type { SignedIn } from '../settings/session.ts';
import type { ErrorFormat } from './errors.ts';

/**
 * Everything a request carries in `ctx.state`, in one place. Koa's own DefaultState is declared
 * here, so every middleware, at every layer, reads and writes these fields typed and without a
 * cast; a field not listed here is a type error.
 */
declare module 'koa' {
  interface DefaultState {
    /** The request's id (request_id.ts), in `X-Request-Id`, every log line and every error body. */
    requestId?: string;
    /** The service's name, logo and pages, for every page's layout (src/pages/site.ts). */
    site?: Site;
    /** How a refusal is answered (errors.ts): JSON unless the section below says `page`. */
    errorFormat?: ErrorFormat;
    /** The route template the request is counted under, where no router names one (metrics/routes.ts). */
    route?: string;
    /** The code of the host's refusal the request was answered with (errors.ts), which its request line names. */
    refusal?: string;
    /** What the engine caught and answered with a 500 itself (engine_events.ts), so an outage becomes a 503. */
    engineError?: unknown;
    /** What the engine refused the request with (its error events, engine_events.ts), so a body too large becomes a 413. */
    engineRefusal?: unknown;
    /** The error an authorization request ended with (src/engine/authorization_errors.ts). */
    authorizationError?: AuthorizationError;
    /** The engine showed its error page instead of answering the client (endpoints/authorization.ts). */
    errorPageShown?: boolean;
    /** A sign-out's way back to an application, offered as a link rather than followed (src/interactions/logout_return.ts). */
    heldLogoutReturn?: LogoutReturn;
    /** Who a data API request acts for, once its credential checked out (src/resource/authenticate.ts). */
    principal?: Principal;
    /** The workspace of a registration's initial access token (endpoints/registration.ts, src/clients/registration.ts). */
    registrationWorkspace?: string;
    /** The registration's initial access token makes its client a FAPI 2.0 client (endpoints/registration.ts, src/clients/fapi.ts). */
    registrationFapi?: boolean;
    /** The initial access token a registration uses up once its client is stored (src/clients/initial_access_tokens.ts). */
    initialAccessTokenUse?: PresentedInitialAccessToken;
    /** The ids of what a registration has stored, removed again should it fail (src/engine/registration_writes.ts). */
    registrationWrites?: { Client?: string; RegistrationAccessToken?: string };
    /** The registration access token an RFC 7592 update or delete claimed before writing (src/engine/registration_token_claims.ts). */
    registrationTokenClaim?: { storeId: string; claim: string };
    /** Why the sign-in form did not sign its user in (src/interactions/router.ts), for the metrics. */
    signInRefused?: 'invalid_credentials' | 'rate_limited';
    /** A step of the settings area's sign-in outside the settings area (src/interactions/router.ts): its error page leads back there. */
    settingsSignIn?: boolean;
    /** The settings area's signed-in user (src/settings/guards.ts). */
    signedIn?: SignedIn;
    /** On the settings area's workspace routes: the workspace, which the user administers. */
    workspace?: { id: string; name: string; role: 'admin' | 'member' | 'viewer' };
  }
}
