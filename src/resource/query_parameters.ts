import { invalidRequest } from '../shared/http_error.ts';

/**
 * Refuses the query parameters of a data API request that takes none: a record read, a create, an
 * update, a delete, the Metadata API. Ignored, a parameter another API of these paths takes
 * (`dryRun`, `upsert`, `fields`) would have the request done as if it were not there: a "dry
 * run" written, an "upsert" making a second record.
 */
export function refuseQueryParameters(names: readonly string[]): void {
  if (!names.length) return;
  const shown = names.slice(0, 5).map((name) => name.slice(0, 64)).join(', ');
  throw invalidRequest(`${shown}: this request takes no query parameters; what it does is said by its method, path and body alone`);
}
