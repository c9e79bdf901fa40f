import type { Middleware } from 'koa';

import { ENGINE_PATH_TEMPLATES } from '../engine/routes.ts';
import { unknownPath } from './unknown_paths.ts';

/**
 * The engine answers only at the exact paths it publishes. Its router also matches a path in
 * another case (`/OAuth/Token`) and one with a trailing slash (`/oauth/token/`), while every step
 * the host runs around an endpoint (rate limits, held error redirects, the token endpoint's
 * checks, security headers) is found by the exact path: such a variant would reach the engine with
 * none of them. So a variant of one of the engine's paths is answered as any unknown path is, 404,
 * before the engine sees it. Clients take the paths from discovery and never need a variant.
 */
export function exactEnginePaths(basePath: string): Middleware {
  const templates = ENGINE_PATH_TEMPLATES.map((template) => `${basePath}${template}`);
  const exact = new Set(templates.filter((template) => !template.includes('/:')));
  const segmented = templates.map((template) => template.split('/'));
  return (ctx, next) => (exact.has(ctx.path) || !segmented.some((template) => isVariantOf(template, ctx.path)) ? next() : unknownPath(ctx));
}

/**
 * Whether `path` matches the template only the way the engine's router folds paths: ASCII case
 * ignored in the template's fixed segments, one trailing slash dropped.
 */
function isVariantOf(template: readonly string[], path: string): boolean {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  const parts = trimmed.split('/');
  if (parts.length !== template.length) return false;
  let exact = trimmed === path;
  for (const [index, segment] of template.entries()) {
    const part = parts[index]!;
    if (segment.startsWith(':')) {
      if (part === '') return false;
    } else if (part !== segment) {
      if (part.toLowerCase() !== segment) return false;
      exact = false;
    }
  }
  return !exact;
}
