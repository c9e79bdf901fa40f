import { fileURLToPath } from 'node:url';

import render from '@koa/ejs';
import Router from '@koa/router';
import Koa from 'koa';
import mount from 'koa-mount';
import type { Provider } from 'oidc-provider';

import type { Store } from '../../adapters/store.ts';
import { Accounts } from '../accounts/accounts.ts';
import type { Config } from '../../config/index.ts';
import { CsrfTokens } from '../pages/csrf.ts';
import { renderErrorPage, renderReturnToClientPage } from '../pages/render.ts';
import { interactionRouter } from '../interactions/router.ts';
import type { Logger } from '../shared/logger.ts';
import { authorizationByPost, formPostAsGet } from './form_post_as_get.ts';
import { checkSecretOnUpdate, hideStoredSecret } from '../clients/client_secrets.ts';
import { recordAuthorizationErrors } from '../engine/authorization_errors.ts';
import { holdErrorRedirects, markErrorPageShown } from './endpoints/authorization.ts';
import { AccessTokenVerifier, jwtAccessTokenEndpoints } from '../tokens/verifier.ts';
import type { KeyMaterial } from '../keys/keys.ts';
import { buildProvider, type RenderError } from '../engine/provider.ts';
import { hideServerKeptMetadata, registrationWorkspace } from '../clients/registration.ts';
import { registrationBodyLimit } from '../clients/registration_hygiene.ts';
import type { RevocationList } from '../tokens/revocation_list.ts';
import { userinfoSigner, userinfoSigningAlg } from '../tokens/signed_userinfo.ts';
import { endProbationOnFirstToken } from '../clients/unused_clients.ts';
import { ENGINE_ROUTES, INTERACTION_PATH, USERINFO_PATH } from '../engine/routes.ts';
import { revocationAnswersJson } from './endpoints/revocation.ts';
import { refuseUnknownResource } from './endpoints/token.ts';
import { rfc6749ErrorCodes } from './endpoints/rfc6749_errors.ts';
import { ApiKeys } from '../api_keys/api_keys.ts';
import { bearerCors } from '../resource/cors.ts';
import { dataApi } from '../resource/data_api.ts';
import { LiveRoles } from '../resource/live_roles.ts';
import { protectedResourceMetadata } from '../resource/protected_resource_metadata.ts';
import { userinfo } from './endpoints/userinfo.ts';
import { inSettingsArea, settingsRouter } from '../settings/router.ts';
import { recordGrantUse } from '../grants/activity.ts';
import { commitBeforeResponse } from './commit_before_response.ts';
import { authorizationServerMetadata } from './discovery.ts';
import { logEngineEvents } from './engine_events.ts';
import { errorMapping, isBackendOutage, requestLog } from './errors.ts';
import { health } from './health.ts';
import { countEngineEvents } from './metrics/engine.ts';
import { metricsEndpoint } from './metrics/endpoint.ts';
import type { Metrics } from './metrics/metrics.ts';
import { requestMetrics } from './metrics/requests.ts';
import { pinOrigin } from './pinned_origin.ts';
import { createRateLimits } from '../rate_limits/limits.ts';
import { atOrUnder, onlyWhere } from './path_guard.ts';
import { requestId } from './request_id.ts';
import { securityHeaders } from './security_headers.ts';

export interface ServiceDependencies {
  config: Config;
  store: Store;
  keys: KeyMaterial;
  /** Started by the caller (it reads the whole list before the service answers). */
  revocations: RevocationList;
  logger: Logger;
  /** Made once a process, so a service rebuilt with new keys counts on; undefined with METRICS=off. */
  metrics: Metrics | undefined;
}

export interface Service {
  app: Koa;
  provider: Provider;
  accounts: Accounts;
}

const VIEWS = fileURLToPath(new URL('../../views', import.meta.url));

/**
 * The Koa host: request id, request log, metrics and error mapping outermost, then the wait for
 * the store's commit before each response, security headers, health, metrics, discovery, the data
 * API (the protected resource, under /rest), then the host's own routes (interaction pages,
 * userinfo, the few places the product completes the engine), then the engine itself, mounted at
 * the issuer's path.
 */
export function createService({ config, store, keys, revocations, logger, metrics }: ServiceDependencies): Service {
  const accounts = new Accounts(store.accounts);
  const { provider, audience, grantWorkspaces, grantActivity } = buildProvider({ config, store, accounts, keys, revocations, renderError: engineErrorPage });
  logEngineEvents(provider, logger);
  recordAuthorizationErrors(provider);
  if (metrics) countEngineEvents(provider, metrics);
  endProbationOnFirstToken(provider, { clients: store.model('Client'), registrationAccessTokens: store.model('RegistrationAccessToken') }, logger);
  recordGrantUse(provider, grantActivity, (error) => logger.warn('could not record the last use of a grant', { error: (error as Error).name }));

  const verifier = new AccessTokenVerifier(keys.jwks, config.issuer, audience, revocations);
  const jwtEndpoints = jwtAccessTokenEndpoints(verifier);
  const rateLimits = createRateLimits(config.rateLimits, store, logger);

  const host = new Router({ prefix: config.basePath || undefined });
  host.post(ENGINE_ROUTES.authorization, authorizationByPost(`${config.issuer}${ENGINE_ROUTES.authorization}`, renderErrorPage));
  host.post(ENGINE_ROUTES.end_session, formPostAsGet(`${config.issuer}${ENGINE_ROUTES.end_session}`, renderErrorPage, 'logout request'));
  // Browser-based clients (MCP hosts running in a page) register from another origin; no cookies are involved.
  const registrationCors = bearerCors('POST');
  host.options(ENGINE_ROUTES.registration, registrationCors);
  host.post(ENGINE_ROUTES.registration, registrationCors, registrationBodyLimit, rateLimits.registration, hideServerKeptMetadata, registrationWorkspace(provider));
  host.all(`${ENGINE_ROUTES.registration}/:clientId`, registrationBodyLimit, hideStoredSecret, hideServerKeptMetadata, checkSecretOnUpdate(store.model('Client')));
  host.post(ENGINE_ROUTES.token, rateLimits.token, refuseUnknownResource(audience), rfc6749ErrorCodes);
  host.post(ENGINE_ROUTES.introspection, rfc6749ErrorCodes, jwtEndpoints.introspection);
  host.post(ENGINE_ROUTES.revocation, rfc6749ErrorCodes, revocationAnswersJson, jwtEndpoints.revocation);
  const userinfoEndpoint = userinfo(verifier, accounts, { algorithmFor: userinfoSigningAlg(provider), sign: userinfoSigner(keys.jwks, config.issuer) });
  host.get(USERINFO_PATH, userinfoEndpoint);
  host.post(USERINFO_PATH, userinfoEndpoint);
  host.options(USERINFO_PATH, userinfoEndpoint);

  const apiKeys = new ApiKeys(store.apiKeys, {
    onTouchError: (error) => logger.warn('could not record the last use of an API key', { error: (error as Error).name }),
  });
  const resourceMetadata = protectedResourceMetadata(config.issuer, audience);
  const restPath = `${config.basePath}/rest`;
  const data = dataApi({
    records: store.records, restPath, verifier, apiKeys, liveRoles: new LiveRoles(store.accounts), resourceMetadata: resourceMetadata.metadataUrl,
    rateLimit: rateLimits.dataApi,
  });

  const interactions = interactionRouter({
    provider, accounts, grantWorkspaces, audience, basePath: config.basePath, csrf: new CsrfTokens(keys.cookieKeys[0]!),
    signIns: rateLimits.signIns,
  });

  // The engine runs on this app's context (koa-mount), so cookies it signs use these keys.
  const app = new Koa({ proxy: config.proxyHops > 0, maxIpsCount: config.proxyHops, keys: keys.cookieKeys });
  pinOrigin(app, config.issuer);
  render(app, { root: VIEWS, layout: 'layout', viewExt: 'ejs', cache: true });
  app.use(requestId(config.proxyHops > 0));
  app.use(requestLog(logger));
  if (metrics) app.use(requestMetrics(metrics, config.basePath));
  app.use(errorMapping(logger));
  app.use(commitBeforeResponse(store));
  app.use(securityHeaders([ENGINE_ROUTES.authorization, ENGINE_ROUTES.end_session].map((path) => `${config.basePath}${path}`)));
  app.use(health(store, keys.jwks));
  if (metrics) app.use(metricsEndpoint(metrics, config.metrics?.token, logger));
  app.use(authorizationServerMetadata(config.basePath));
  app.use(onlyWhere((path) => resourceMetadata.paths.has(path), resourceMetadata.middleware));
  app.use(onlyWhere(atOrUnder(restPath), data));
  const interactionPrefix = `${config.basePath}${INTERACTION_PATH}/`;
  app.use(onlyWhere((path) => path.startsWith(interactionPrefix), interactions.routes()));
  app.use(onlyWhere(hostPaths(config.basePath), host.routes()));
  const settings = settingsRouter({ provider, accounts, store, grantWorkspaces, grantActivity, apiKeys, csrfKey: keys.cookieKeys[0]!, issuer: config.issuer, basePath: config.basePath });
  app.use(onlyWhere(inSettingsArea(config.basePath), settings.routes()));
  app.use(onlyWhere(atOrUnder(`${config.basePath}${ENGINE_ROUTES.authorization}`), holdErrorRedirects(config.issuer, renderReturnToClientPage)));
  app.use(mount(config.basePath || '/', provider as unknown as Koa));
  return { app, provider, accounts };
}

/** The paths the host's own routes answer or complete. */
function hostPaths(basePath: string): (path: string) => boolean {
  const exact = new Set([ENGINE_ROUTES.authorization, ENGINE_ROUTES.end_session, ENGINE_ROUTES.registration, ENGINE_ROUTES.token, ENGINE_ROUTES.introspection, ENGINE_ROUTES.revocation, USERINFO_PATH]
    .map((path) => `${basePath}${path}`));
  const clientManagement = `${basePath}${ENGINE_ROUTES.registration}/`;
  return (path) => exact.has(path) || path.startsWith(clientManagement);
}

/** The engine's `renderError`: errors that must not redirect to the client get the product's error page. */
const engineErrorPage: RenderError = async (ctx, out, error) => {
  if (isBackendOutage(error)) ctx.status = 503;
  const code = isBackendOutage(error) ? 'temporarily_unavailable' : String(out.error ?? 'server_error');
  markErrorPageShown(ctx);
  await renderErrorPage(ctx, code, typeof out.error_description === 'string' ? out.error_description : undefined);
};
