import type { IncomingMessage } from 'node:http';

/**
 * Whether the request carries a header more than once. Node keeps the first of some headers and
 * drops the others (Authorization among them: it is no list, RFC 9110 section 5.3), so a proxy in
 * front that reads the last one would act on another credential than the service. Only the raw
 * headers tell.
 */
export function isRepeatedHeader(req: IncomingMessage, name: string): boolean {
  const wanted = name.toLowerCase();
  let seen = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i]!.toLowerCase() === wanted && ++seen > 1) return true;
  }
  return false;
}
