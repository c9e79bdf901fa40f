import { createHash } from 'node:crypto';

import type { Context } from 'koa';
import type { Grant, InteractionResults, Provider } from 'oidc-provider';

import { LIFETIMES } from '../../config/lifetimes.ts';
import type { Accounts, WorkspaceMembership } from '../accounts/accounts.ts';
import type { ProtectedResource, ProtectedResources } from '../clients/protected_resources.ts';
import { requestedClaimNames } from '../engine/requested_claims.ts';
import { ENGINE_ROUTES, INTERACTION_PATH } from '../engine/routes.ts';
import type { GrantWorkspaces } from '../grants/workspaces.ts';
import { clientDocuments, redirectTarget } from '../pages/client_display.ts';
import type { CsrfTokens } from '../pages/csrf.ts';
import { renderPage } from '../pages/render.ts';
import { describeClaims, SCOPE_DESCRIPTIONS } from '../pages/scope_descriptions.ts';
import { secondsUntil } from '../shared/clock.ts';
import { HttpError } from '../shared/http_error.ts';
import { finishInteraction } from './finish.ts';
import { findClient, type Details } from './login.ts';

export interface ConsentDependencies {
  provider: Provider;
  accounts: Accounts;
  grantWorkspaces: GrantWorkspaces;
  csrf: CsrfTokens;
  basePath: string;
  /** The APIs tokens are issued for, and the one a request that names none is for. */
  resources: ProtectedResources;
  defaultResource: string;
}

/** What the engine says the browser's grant for this client lacks (its consent prompt's details). */
interface MissingFromGrant {
  missingOIDCScope?: string[];
  missingOIDCClaims?: string[];
  missingResourceScopes?: Record<string, string[]>;
}

interface ConsentItem {
  value: string;
  description: string;
}

/**
 * The consent page: who asks, which APIs it will reach with what it is allowed, in which
 * workspace, and where the browser goes next. When the browser's user already allowed the client
 * (a grant, in one workspace), only what is new is asked for, in that workspace, and allowing
 * adds it to the same grant: asking again for the union of scopes (a resource's
 * `insufficient_scope`) keeps one grant.
 */
export async function showConsent(ctx: Context, deps: ConsentDependencies, details: Details, error?: string): Promise<void> {
  const { provider, accounts, csrf, basePath } = deps;
  const accountId = details.session?.accountId;
  const user = accountId ? await accounts.getUser(accountId) : undefined;
  if (!user) throw new HttpError(400, 'session_expired', '');
  const memberships = await accounts.workspacesOf(user.id);
  // Nothing to allow in: the application is told, as after a denial (RFC 6749 section 4.1.2.1).
  if (memberships.length === 0) return finishInteraction(ctx, provider, IN_NO_WORKSPACE, { mergeWithLastSubmission: false });
  const existing = await existingGrant(deps, details, memberships);
  const client = await findClient(provider, details);
  const target = redirectTarget(String(details.params.redirect_uri));
  const requestedScope = String(details.params.scope ?? '');
  const requested = consentItems(requestedScope, details.params.claims);
  // What the grant lacks for the APIs named, less what the user already allowed for another of them.
  const added = existing ? missingItems(details.prompt.details as MissingFromGrant).filter(({ value }) => !existing.allowed.some((item) => item.value === value)) : [];
  await renderPage(ctx, 'consent', 'Authorize', {
    clientName: client.name,
    client,
    documents: clientDocuments(client),
    redirectHost: target.label,
    userEmail: user.email,
    signOutUrl: `${basePath}${ENGINE_ROUTES.end_session}`,
    switchUrl: `${basePath}${INTERACTION_PATH}/${details.uid}/switch`,
    scopes: added.length ? added : requested,
    alreadyAllowed: existing && added.length ? existing.allowed : [],
    apis: (await requestedResources(deps, details))
      .filter(({ api }) => reachedWith(api, requestedScope))
      .map(({ api: { name, resource } }) => ({ name, host: URL.parse(resource)?.host ?? resource })),
    workspaces: (existing ? [existing.workspace] : memberships).map(({ id, name, role }) => ({ id, name, role })),
    action: `${basePath}${INTERACTION_PATH}/${details.uid}/consent`,
    csrfToken: csrf.issue(details.uid),
    error,
  }, { formAction: target.formAction, imgSrc: client.logo && [client.logo.origin] });
}

/**
 * A user who belongs to no workspace has nothing to allow an application into: a token names a
 * workspace. The authorization server denies the request; a client that registered itself hears
 * of it through the page the user reads it on (src/http/endpoints/authorization.ts), which lets
 * the user sign out to use another account.
 */
const IN_NO_WORKSPACE: InteractionResults = {
  error: 'access_denied',
  error_description: 'the signed-in user is not a member of any workspace; a workspace admin can add them',
};

/**
 * Records what the user allowed (scopes for each API, and claims asked for by name). A grant is
 * tied to one workspace: consenting for another workspace starts a new grant rather than moving the
 * old one's tokens; consenting again in the same one adds what was new to it.
 */
export async function saveGrant(deps: ConsentDependencies, details: Details, accountId: string, workspaceId: string): Promise<string> {
  const { provider, grantWorkspaces } = deps;
  const clientId = String(details.params.client_id);
  const existing = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
  const sameWorkspace = existing && await grantWorkspaces.workspaceOf(existing.jti) === workspaceId;
  const grant = sameWorkspace ? existing : Object.assign(new provider.Grant({ accountId, clientId }), { jti: newGrantId(details.uid) });

  if (sameWorkspace) {
    // The engine lists what the existing grant lacks.
    const missing = details.prompt.details as MissingFromGrant;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(resource, scopes.join(' '));
  } else {
    const scope = String(details.params.scope ?? '');
    grant.addOIDCScope(scope);
    grant.addOIDCClaims(requestedClaimNames(details.params.claims));
    for (const { named, api } of await requestedResources(deps, details)) grant.addResourceScope(named, scopesFor(api, scope));
  }
  const grantId = await grant.save();
  const expiresIn = grant.exp ? secondsUntil(grant.exp) : LIFETIMES.Grant;
  await grantWorkspaces.bind(grantId, workspaceId, expiresIn);
  return grantId;
}

/**
 * The id of the grant a consent creates, one per interaction: the same form sent twice at once
 * (a double click) saves the one grant twice, never two grants. Not a secret: a grant id gives
 * nothing to whoever knows it.
 */
function newGrantId(interactionUid: string): string {
  return createHash('sha256').update(`grant for interaction ${interactionUid}`).digest('base64url');
}

/**
 * The APIs the request names (RFC 8707 `resource`), or the data API when it names none, each with
 * the URI it was named by: the engine looks a grant's scopes up by that URI, which may spell the
 * API's scheme or host in upper case.
 */
async function requestedResources({ resources, defaultResource }: ConsentDependencies, details: Details): Promise<Array<{ named: string; api: ProtectedResource }>> {
  const resource = details.params.resource;
  const uris = (Array.isArray(resource) ? resource : typeof resource === 'string' ? [resource] : [defaultResource]).map(String);
  const found = await Promise.all(uris.map(async (named) => ({ named, api: await resources.find(named) })));
  return found.filter((item): item is { named: string; api: ProtectedResource } => item.api !== undefined);
}

/**
 * Whether a token with `scope` reaches the API, for the consent page to name it: one of the scopes
 * it accepts; for the APIs served here, `api` (the data API's tokens carry openid and profile too,
 * for userinfo, which alone reach none of its records).
 */
function reachedWith(api: ProtectedResource, scope: string): boolean {
  const carried = scopesFor(api, scope).split(' ').filter(Boolean);
  return api.builtIn ? carried.includes('api') : carried.length > 0;
}

/** The requested scopes an API accepts: what its tokens may carry. */
function scopesFor(api: ProtectedResource, scope: string): string {
  return scope.split(' ').filter((value) => api.scopes.includes(value)).join(' ');
}

/** The user's grant for this client that the engine found, with its workspace, while the user is still a member there. */
async function existingGrant(deps: ConsentDependencies, details: Details, memberships: WorkspaceMembership[]): Promise<{ grant: Grant; workspace: WorkspaceMembership; allowed: ConsentItem[] } | undefined> {
  const grant = details.grantId ? await deps.provider.Grant.find(details.grantId) : undefined;
  const workspaceId = grant && await deps.grantWorkspaces.workspaceOf(grant.jti);
  const workspace = memberships.find(({ id }) => id === workspaceId);
  if (!grant || !workspace) return undefined;
  const scopes = new Set(grant.getOIDCScope().split(' ').filter(Boolean));
  for (const resource of Object.keys(grant.resources ?? {})) for (const scope of grant.getResourceScope(resource).split(' ').filter(Boolean)) scopes.add(scope);
  return { grant, workspace, allowed: consentItems([...scopes].join(' '), undefined) };
}

/** What the consent page lists for a scope string: each scope, and the claims asked for by name that no scope already covers. */
function consentItems(scope: string, claims: unknown): ConsentItem[] {
  const values = scope.split(' ').filter(Boolean);
  const items = values.map((value) => ({ value, description: SCOPE_DESCRIPTIONS[value] ?? value }));
  const named = values.includes('profile') ? [] : requestedClaimNames(claims);
  if (named.length) items.push({ value: 'claims', description: describeClaims(named) });
  return items;
}

/** What the grant lacks, as consent items. */
function missingItems({ missingOIDCScope = [], missingOIDCClaims = [], missingResourceScopes = {} }: MissingFromGrant): ConsentItem[] {
  const scopes = new Set([...missingOIDCScope, ...Object.values(missingResourceScopes).flat()]);
  const items = [...scopes].map((value) => ({ value, description: SCOPE_DESCRIPTIONS[value] ?? value }));
  const claims = scopes.has('profile') ? [] : missingOIDCClaims.filter((claim) => claim !== 'sub');
  if (claims.length) items.push({ value: 'claims', description: describeClaims(claims) });
  return items;
}
