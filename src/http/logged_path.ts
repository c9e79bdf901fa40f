import { couldBeClientId } from '../clients/client_ids.ts';

/**
 * Segments of a path shorter than this are written to the log as they are: the ids this service
 * puts in its paths are (`ws_…`, `usr_…`, `key_…`, an interaction's uid), and every credential it
 * issues is longer (tokens, codes, client secrets and API keys are 40 characters or more).
 */
const SHORT_SEGMENT = 32;

/** A data API record's id. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A request's path as the log keeps it: a long segment that is none of this service's ids is
 * written as its length. A client that puts its token, API key or secret in a URL (a template
 * filled in wrongly, `/rest/<token>`) gets a 404, and its credential stays out of the log.
 */
export function loggedPath(path: string): string {
  if (path.length < SHORT_SEGMENT) return path;
  return path.split('/').map(loggedSegment).join('/');
}

function loggedSegment(segment: string): string {
  if (segment.length < SHORT_SEGMENT || UUID.test(segment) || couldBeClientId(segment)) return segment;
  return `(${segment.length} characters)`;
}
