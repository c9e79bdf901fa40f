/**
 * Whether a request's `Content-Encoding` puts its body in a content coding. The engine and the
 * MCP transport read a body as it comes, so one in a coding (gzip) would be read as its encoded
 * bytes, and one labelled with a coding it is not in as if unlabelled: both are refused with 415
 * naming `identity`, the one taken (RFC 9110 sections 8.4 and 15.5.16).
 */
export function isEncodedBody(contentEncoding: string): boolean {
  const coding = contentEncoding.trim().toLowerCase();
  return coding !== '' && coding !== 'identity';
}
