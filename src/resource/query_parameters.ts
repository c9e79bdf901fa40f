import type { Middleware } from 'koa';

import { invalidRequest } from '../shared/http_error.ts';

/** What a list request may say: its page. */
const LIST_PARAMETERS: ReadonlySet<string> = new Set(['limit', 'starting_after']);

/**
 * Refuses a list request's query parameters other than limit and starting_after. A list is neither
 * filtered nor sorted: a client that sends `filter` or `order_by` (as another API of these paths
 * takes them) would otherwise act on every record believing it had only some.
 */
export function refuseUnknownListParameters(names: readonly string[]): void {
  const unknown = names.filter((name) => !LIST_PARAMETERS.has(name));
  if (!unknown.length) return;
  throw invalidRequest(`${shown(unknown)}: a list takes only limit and starting_after; it is neither filtered nor sorted (records come in the order they were created)`);
}

/**
 * Before a data API request that takes no query parameters (a record read, a create, an update, a
 * delete, the Metadata API), after its body is read: any is refused. Ignored, a parameter another
 * API of these paths takes (`dryRun`, `upsert`, `fields`) would have the request done as if it were
 * not there: a "dry run" written, an "upsert" making a second record.
 */
export const takesNoQuery: Middleware = (ctx, next) => {
  const names = Object.keys(ctx.query);
  if (names.length) throw invalidRequest(`${shown(names)}: this request takes no query parameters; what it does is said by its method, path and body alone`);
  return next();
};

/** The first few names, each as far as a name goes. */
function shown(names: readonly string[]): string {
  return names.slice(0, 5).map((name) => name.slice(0, 64)).join(', ');
}
