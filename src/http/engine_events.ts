import type { KoaContextWithOIDC, Provider } from 'oidc-provider';

import { couldBeClientId } from '../clients/client_ids.ts';
import type { Logger } from '../shared/logger.ts';
import { rememberEngineError, rememberEngineRefusal } from './errors.ts';

/** The engine's error events worth a log line: clients see one generic description, operators see why. */
const CLIENT_ERROR_EVENTS = [
  'authorization.error',
  'end_session.error',
  'end_session_confirm.error',
  'grant.error',
  'introspection.error',
  'pushed_authorization_request.error',
  'revocation.error',
  'registration_create.error',
  'registration_read.error',
  'registration_update.error',
  'registration_delete.error',
] as const;

interface EngineError {
  error?: string;
  error_description?: string;
  error_detail?: string;
  message?: string;
  /** What the engine caught, whose message became its detail. */
  cause?: unknown;
}

/**
 * The most of a value from the request a log line keeps: enough to tell what was wrong, while a
 * 50 KB parameter the engine repeats in its detail ("requested scope ...") does not make a 50 KB line.
 */
const LOGGED_VALUE_MAX = 300;

/**
 * Why the engine refused a request. Not a JSON parser's message, which the engine takes for its
 * detail and which quotes the body it failed on (a secret in it, say): the description stands in.
 */
function reasonOf(error: EngineError): string | undefined {
  const detail = error.cause instanceof SyntaxError ? undefined : error.error_detail;
  return (detail ?? error.error_description)?.slice(0, LOGGED_VALUE_MAX);
}

/**
 * The client a refused request named: the engine's client, or the client_id asked for (a metadata
 * document URL that was refused). One of no shape this server's client ids have is told by its
 * length alone: it may be a secret sent in the wrong field.
 */
function clientIdOf(ctx: KoaContextWithOIDC): string | undefined {
  const known = ctx.oidc?.client?.clientId;
  if (known !== undefined) return known;
  const named = ctx.oidc?.params?.client_id;
  if (typeof named !== 'string') return undefined;
  return couldBeClientId(named) ? withoutUserinfo(named).slice(0, LOGGED_VALUE_MAX) : `(not a client id, ${named.length} characters)`;
}

/**
 * A client_id URL without the user name and password it may carry (no client may have one, so no
 * client is hidden), whether or not a URL parser would read the rest.
 */
function withoutUserinfo(clientId: string): string {
  return clientId.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/?#@]*@/, '$1');
}

/**
 * Logs why the engine refused a request (`error_detail`, e.g. "authorization code is expired"),
 * with the client id and never a token or secret, and hands its 500s to the host's error mapping.
 */
export function logEngineEvents(provider: Provider, logger: Logger): void {
  // The engine's typings declare each event separately; all of these share one listener shape.
  const on = provider.on.bind(provider) as (event: string, listener: (ctx: KoaContextWithOIDC, error: EngineError) => void) => void;
  for (const event of CLIENT_ERROR_EVENTS) {
    on(event, (ctx, error) => {
      rememberEngineRefusal(ctx, error);
      // The engine refuses JWT access tokens at introspection and revocation; the host answers those.
      if (error.error === 'unsupported_token_type') return;
      logger.info('request refused', {
        event,
        error: error.error ?? error.message,
        // The engine's detail when it gives one, else its description (a metadata document's refusal says why there).
        detail: reasonOf(error),
        client_id: clientIdOf(ctx),
      });
    });
  }
  provider.on('server_error', (ctx, error) => rememberEngineError(ctx, error));
}
