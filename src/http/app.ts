import { fileURLToPath } from 'node:url';

import render from '@koa/ejs';
import type Router from '@koa/router';
import Koa from 'koa';
import compose from 'koa-compose';
import mount from 'koa-mount';
import type { Middleware } from 'koa';
import type { Provider } from 'oidc-provider';

import type { Store } from '../../adapters/store.ts';
import type { Config } from '../../config/index.ts';
import { Accounts } from '../accounts/accounts.ts';
import { ApiKeys } from '../api_keys/api_keys.ts';
import { SETTINGS_PATH } from '../clients/first_party.ts';
import { endProbationOnFirstToken } from '../clients/unused_clients.ts';
import { recordAuthorizationErrors } from '../engine/authorization_errors.ts';
import { buildProvider } from '../engine/provider.ts';
import { mcpAudience } from '../engine/resource_indicators.ts';
import { ENGINE_ROUTE_TEMPLATES, ENGINE_ROUTES, INTERACTION_PATH } from '../engine/routes.ts';
import { UserAccess } from '../engine/user_access.ts';
import { recordGrantUse } from '../grants/activity.ts';
import { interactionRouter } from '../interactions/router.ts';
import type { KeyMaterial } from '../keys/keys.ts';
import { CsrfTokens } from '../pages/csrf.ts';
import { noSuchPage } from '../pages/no_such_page.ts';
import { sameOriginForms } from '../pages/same_origin_forms.ts';
import { describeSite, siteOf } from '../pages/site.ts';
import { COUNTED_KEYS_PURPOSE, Counters, createNewInteractionLimit, createNewMetadataDocumentLimit, createRateLimits, KNOWN_DEVICES_PURPOSE, KnownDevices } from '../rate_limits/limits.ts';
import { dataApi } from '../resource/data_api.ts';
import { IDEMPOTENCY_PURPOSE, IdempotentCreates } from '../resource/idempotency.ts';
import { mcpEndpoint, mcpHosts } from '../resource/mcp.ts';
import { LiveRoles } from '../resource/live_roles.ts';
import { credentialKey } from '../resource/principal.ts';
import { protectedResourceMetadata } from '../resource/protected_resource_metadata.ts';
import { inSettingsArea, settingsRouter } from '../settings/router.ts';
import type { Logger } from '../shared/logger.ts';
import type { RevocationList } from '../tokens/revocation_list.ts';
import { userinfoSigner } from '../tokens/signed_userinfo.ts';
import { AccessTokenVerifier } from '../tokens/verifier.ts';
import { commitBeforeResponse } from './commit_before_response.ts';
import { authorizationServerMetadata } from './discovery.ts';
import { unknownPath } from './unknown_paths.ts';
import { holdErrorRedirects } from './endpoints/authorization.ts';
import { engineEndpoints } from './endpoints/index.ts';
import { exactEnginePaths } from './exact_engine_paths.ts';
import { engineAutoPostInLayout } from './engine_auto_post.ts';
import { enginePages } from './engine_pages.ts';
import { logEngineEvents } from './engine_events.ts';
import { answerErrorsAs, errorMapping, logConnectionErrors } from './errors.ts';
import { health, serviceReadiness } from './health.ts';
import { atHomePage, homePage } from './home_page.ts';
import { metricsEndpoint } from './metrics/endpoint.ts';
import { countEngineEvents } from './metrics/engine.ts';
import type { Metrics } from './metrics/metrics.ts';
import { countRequests } from './metrics/requests.ts';
import { atOrUnder, onlyWhere } from './path_guard.ts';
import { pagesAtIssuerHost } from './page_host.ts';
import { originFormTargets, pinOrigin } from './pinned_origin.ts';
import { POSTED_FORM_MODEL, PostedForms } from './posted_forms.ts';
import { requestId } from './request_id.ts';
import { logRequests } from './request_log.ts';
import { timeRequests } from './request_timing.ts';
import { securityHeaders } from './security_headers.ts';
import { tokenRequestClientId } from './token_request_form.ts';
import { DPOP_NONCE_PURPOSE, DpopNonces } from '../tokens/dpop_nonces.ts';
import { DPOP_SIGNING_ALGORITHMS, DpopProofs } from '../tokens/dpop_proofs.ts';
import { dpopChallenge, type DpopPolicy } from '../resource/sender_constraint.ts';

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
 * The Koa host. Every request goes through the stack below, top to bottom, until something
 * answers it (docs/architecture.md draws it):
 *
 *   request id -> the site (the pages' name and logo) -> timing (request log, metrics) -> error mapping
 *   -> wait for the store's commit -> security headers -> /healthz, /readyz -> /metrics (METRICS=public only)
 *   -> pages only at BASE_URL's host -> home page -> discovery aliases
 *   -> protected resource metadata -> data API (/rest) -> MCP (/mcp)
 *   -> the product's forms sent from another site refused (/interaction, /settings, the sign-out question)
 *   -> login and consent pages (/interaction)
 *   -> the host's steps at the engine's endpoints (src/http/endpoints/) -> settings area (/settings)
 *   -> held error redirects (around /oauth/authorize) -> the engine's self-submitting pages in the layout
 *   -> the engine's exact paths only
 *   -> the engine, mounted at the issuer's path.
 */
export function createService({ config, store, keys, revocations, logger, metrics }: ServiceDependencies): Service {
  const { issuer, basePath } = config;
  const accounts = new Accounts(store.accounts, { serviceName: config.service.name });
  const counters = new Counters(store, keys.keyRing.derivedKeys(COUNTED_KEYS_PURPOSE)[0]!);
  const { provider, audience, resources, grantWorkspaces, grantActivity, rotations } = buildProvider({
    config, store, accounts, keys, revocations, pages: enginePages(accounts, issuer), newInteractions: createNewInteractionLimit(config.rateLimits, counters),
    newMetadataDocuments: createNewMetadataDocumentLimit(config.rateLimits, counters),
  });
  logEngineEvents(provider, logger);
  recordAuthorizationErrors(provider);
  if (metrics) countEngineEvents(provider, metrics);
  endProbationOnFirstToken(provider, { clients: store.model('Client'), registrationAccessTokens: store.model('RegistrationAccessToken') }, logger);
  recordGrantUse(provider, grantActivity, (error) => logger.warn('could not record the last use of a grant', { error: (error as Error).name }));

  const verifier = new AccessTokenVerifier(keys.jwks, issuer, revocations);
  const dpop: DpopPolicy = {
    proofs: new DpopProofs(store.model('ReplayDetection'), new DpopNonces(keys.keyRing.derivedKeys(DPOP_NONCE_PURPOSE)[0]!), config.dpopNonceRequired),
    algorithms: DPOP_SIGNING_ALGORITHMS,
    required: config.dpopRequired,
  };
  const rateLimits = createRateLimits(config.rateLimits, counters, logger, {
    tokenClientId: tokenRequestClientId,
    dataApiCredential: (ctx) => ctx.state.principal && credentialKey(ctx.state.principal),
  }, new KnownDevices(
    keys.keyRing.derivedKeys(KNOWN_DEVICES_PURPOSE), [`${basePath}${INTERACTION_PATH}`, `${basePath}${SETTINGS_PATH}/password`], (email) => accounts.credentialStamp(email),
  ));
  const liveRoles = new LiveRoles(store.accounts);
  const endpoints = engineEndpoints({
    issuer, basePath, provider, rotations, resources, audience, accounts, clients: store.model('Client'), registrationAccessTokens: store.model('RegistrationAccessToken'), verifier, liveRoles, rateLimits,
    signUserinfo: userinfoSigner(keys.jwks, issuer), dpop, postedForms: new PostedForms(store.model(POSTED_FORM_MODEL), keys.keyRing),
  });

  const apiKeys = new ApiKeys(store.apiKeys, {
    onTouchError: (error) => logger.warn('could not record the last use of an API key', { error: (error as Error).name }),
  });
  const mcpResource = mcpAudience(issuer);
  const resourceMetadata = protectedResourceMetadata(issuer, [
    { resource: audience, name: 'Workspace data API (Core and Metadata)' },
    { resource: mcpResource, name: 'Workspace data over MCP' },
  ], dpopChallenge(dpop));
  const restPath = `${basePath}/rest`;
  const mcpPath = `${basePath}/mcp`;
  const idempotentCreates = new IdempotentCreates(keys.keyRing.derivedKeys(IDEMPOTENCY_PURPOSE));
  const data = dataApi({
    records: store.records, idempotentCreates, restPath, audience, verifier, apiKeys, liveRoles, resourceMetadata: resourceMetadata.metadataUrlOf(audience), dpop,
    rateLimit: rateLimits.dataApi, failedCredentials: rateLimits.failedCredentials,
  });
  const mcp = mcpEndpoint({
    records: store.records, idempotentCreates, mcpPath, restPath, audience: mcpResource, verifier, apiKeys, liveRoles, resourceMetadata: resourceMetadata.metadataUrlOf(mcpResource), dpop,
    allowedHosts: mcpHosts(issuer, config.port), trustProxy: config.proxyHops > 0, allowedOrigins: [new URL(issuer).origin, ...config.mcpAllowedOrigins], rateLimit: rateLimits.dataApi,
    failedCredentials: rateLimits.failedCredentials,
  });
  const interactions = interactionRouter({
    provider, accounts, grantWorkspaces, resources, defaultResource: audience, basePath, csrf: new CsrfTokens(keys.cookieKeys[0]!), signIns: rateLimits.signIns,
  });
  const settings = settingsRouter({
    provider, accounts, store, grantWorkspaces, grantActivity, apiKeys, csrfKey: keys.cookieKeys[0]!, issuer, basePath,
    userAccess: new UserAccess({ provider, store, grantWorkspaces }), signIns: rateLimits.signIns, logger,
  });
  const pages = (router: Router) => compose([answerErrorsAs('page'), router.routes() as Middleware, noSuchPage]);
  const site = siteOf(config.service, issuer);
  const interactionPages = atOrUnder(`${basePath}${INTERACTION_PATH}`);
  const settingsPages = inSettingsArea(basePath);
  const enginePagePaths = [ENGINE_ROUTES.authorization, ENGINE_ROUTES.end_session].map((path) => atOrUnder(`${basePath}${path}`));
  const isHome = atHomePage(site);
  const isEnginePage = (path: string) => enginePagePaths.some((under) => under(path));
  const isPage = (path: string) => isHome(path) || interactionPages(path) || settingsPages(path) || isEnginePage(path);
  // The forms of the product's own pages: sign-in and consent, the settings area, and the sign-out question (the engine's
  // confirmation form, which the product renders); never the engine's endpoints, which take forms from other sites.
  const signOutConfirmation = `${basePath}${ENGINE_ROUTE_TEMPLATES.end_session_confirm}`;
  const isProductForm = (path: string) => interactionPages(path) || settingsPages(path) || path === signOutConfirmation;

  // The engine runs on this app's context (koa-mount), so cookies it signs use these keys.
  const app = new Koa({ proxy: config.proxyHops > 0, maxIpsCount: config.proxyHops, keys: keys.cookieKeys });
  pinOrigin(app, issuer);
  app.use(originFormTargets);
  render(app, { root: VIEWS, layout: 'layout', viewExt: 'ejs', cache: true });
  app.use(requestId(config.proxyHops > 0));
  app.use(describeSite(site));
  app.use(timeRequests([logRequests(logger), ...(metrics ? [countRequests(metrics, basePath)] : [])]));
  logConnectionErrors(app, logger);
  app.use(errorMapping(logger));
  app.use(commitBeforeResponse(store));
  app.use(securityHeaders([ENGINE_ROUTES.authorization, ENGINE_ROUTES.end_session].map((path) => `${basePath}${path}`)));
  app.use(health(serviceReadiness(store, keys.jwks)));
  // Only when the operator chose it (METRICS=public): by default the metrics have their own listener (metrics/listener.ts).
  if (metrics && config.metrics?.where === 'public') app.use(metricsEndpoint(() => metrics.scrape(), config.metrics.token, logger));
  app.use(pagesAtIssuerHost(issuer, config.proxyHops > 0, isPage));
  app.use(homePage(site, issuer));
  app.use(authorizationServerMetadata(basePath, config.fapi));
  app.use(onlyWhere((path) => resourceMetadata.paths.has(path), resourceMetadata.middleware));
  app.use(onlyWhere(atOrUnder(restPath), data));
  app.use(onlyWhere(atOrUnder(mcpPath), mcp));
  app.use(onlyWhere(isProductForm, sameOriginForms(issuer)));
  app.use(onlyWhere(interactionPages, pages(interactions)));
  app.use(onlyWhere(endpoints.handles, endpoints.routes));
  app.use(onlyWhere(settingsPages, pages(settings)));
  app.use(onlyWhere(atOrUnder(`${basePath}${ENGINE_ROUTES.authorization}`), holdErrorRedirects(issuer)));
  app.use(onlyWhere(isEnginePage, engineAutoPostInLayout(issuer)));
  app.use(exactEnginePaths(basePath));
  app.use(mount(basePath || '/', provider as unknown as Koa));
  app.use(unknownPath);
  return { app, provider, accounts };
}
