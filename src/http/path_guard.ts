import type { DefaultContext, DefaultState, Middleware } from 'koa';

/**
 * Runs `middleware` only for requests whose path `applies`, so a router's regexes run only where
 * they can match: every other request (the token endpoint above all) passes with one check.
 */
/** A path predicate: the path itself, or anything below it (`/rest`, `/rest/companies`). */
export function atOrUnder(path: string): (candidate: string) => boolean {
  const below = `${path}/`;
  return (candidate) => candidate === path || candidate.startsWith(below);
}

export function onlyWhere<S = DefaultState, C = DefaultContext>(applies: (path: string) => boolean, middleware: Middleware<S, C>): Middleware<S, C> {
  return (ctx, next) => (applies(ctx.path) ? middleware(ctx, next) : next());
}
