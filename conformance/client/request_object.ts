/**
 * SerializeRequestObjectWithNullAlgorithm: the request's parameters as the claims of an unsigned
 * JWT (alg none, empty signature).
 */
export function unsignedRequestObject(claims: Record<string, string>): string {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${encode({ alg: 'none' })}.${encode(claims)}.`;
}

/** The parameters OAuth 2.0 and OIDCC 6.1 require outside a request object too. */
const REQUIRED_DUPLICATES = ['response_type', 'client_id', 'scope', 'redirect_uri'];

/**
 * AbstractBuildRequestObjectRedirectToAuthorizationEndpoint: the request object (by value or by
 * reference), the required duplicates, and any parameter whose value differs from the object's.
 */
export function requestObjectWire(outer: Record<string, string>, object: Record<string, string>, carrier: { request: string } | { request_uri: string }): Record<string, string> {
  const wire: Record<string, string> = { ...carrier };
  for (const [name, value] of Object.entries(outer)) {
    if (REQUIRED_DUPLICATES.includes(name) || object[name] !== value) wire[name] = value;
  }
  return wire;
}
