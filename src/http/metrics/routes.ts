import { ENGINE_ROUTES, INTERACTION_PATH, USERINFO_PATH } from '../../engine/routes.ts';
import { OBJECTS } from '../../resource/objects.ts';
import { PROBE_PATHS } from '../health.ts';
import { METRICS_PATH } from './endpoint.ts';

/** What a path no template matches is counted as: a scanner's guesses must not each make a series. */
const OTHER_ROUTE = 'other';

/** Served at the origin's root, whatever the issuer's path. */
const ROOT_PATHS = [...PROBE_PATHS, METRICS_PATH];

/** Relative to the issuer. A `:name` segment matches any one segment: the label never holds an id. */
const TEMPLATES = [
  '/.well-known/openid-configuration',
  '/.well-known/oauth-authorization-server',
  ENGINE_ROUTES.authorization,
  `${ENGINE_ROUTES.authorization}/:uid`,
  ENGINE_ROUTES.token,
  ENGINE_ROUTES.registration,
  `${ENGINE_ROUTES.registration}/:clientId`,
  ENGINE_ROUTES.jwks,
  ENGINE_ROUTES.revocation,
  ENGINE_ROUTES.introspection,
  USERINFO_PATH,
  ENGINE_ROUTES.end_session,
  `${ENGINE_ROUTES.end_session}/confirm`,
  `${ENGINE_ROUTES.end_session}/success`,
  `${INTERACTION_PATH}/:uid`,
  `${INTERACTION_PATH}/:uid/login`,
  `${INTERACTION_PATH}/:uid/consent`,
  '/rest/metadata/objects',
  '/rest/metadata/objects/:id',
  ...OBJECTS.flatMap(({ namePlural }) => [`/rest/${namePlural}`, `/rest/${namePlural}/:id`]),
  '/settings',
  '/settings/callback',
  '/settings/assets/:asset',
  '/settings/applications/revoke',
  '/settings/workspaces/:workspaceId',
  '/settings/workspaces/:workspaceId/api-keys',
  '/settings/workspaces/:workspaceId/api-keys/revoke',
];

/**
 * The route template a request path is counted under (`/oauth/register/:clientId`), relative to
 * the issuer, or OTHER_ROUTE. Fixed paths are one map lookup (the token endpoint is one); only a
 * path that is not falls to the templates with parameters.
 */
export function routeTemplates(basePath: string): (path: string) => string {
  const fixed = new Map<string, string>(ROOT_PATHS.map((path) => [path, path]));
  const withParameters: string[][] = [];
  for (const template of TEMPLATES) {
    if (template.includes('/:')) withParameters.push(template.split('/'));
    else fixed.set(`${basePath}${template}`, template);
  }
  // RFC 8414 and RFC 9728 also put the issuer's (or the resource's) path after the well-known name.
  fixed.set(`/.well-known/oauth-authorization-server${basePath}`, '/.well-known/oauth-authorization-server');
  fixed.set(`/.well-known/openid-configuration${basePath}`, '/.well-known/openid-configuration');
  fixed.set('/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource');
  fixed.set(`/.well-known/oauth-protected-resource${basePath}/rest`, '/.well-known/oauth-protected-resource/rest');
  return (path) => fixed.get(path) ?? matchTemplate(withParameters, basePath, path);
}

function matchTemplate(templates: string[][], basePath: string, path: string): string {
  if (!path.startsWith(`${basePath}/`)) return OTHER_ROUTE;
  const segments = path.slice(basePath.length).split('/');
  for (const template of templates) {
    if (template.length === segments.length && template.every((part, i) => part.startsWith(':') ? segments[i] !== '' : part === segments[i])) {
      return template.join('/');
    }
  }
  return OTHER_ROUTE;
}
