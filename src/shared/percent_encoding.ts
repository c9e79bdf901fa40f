/**
 * A URI path as RFC 3986 section 6.2.2 normalises it for comparison: a percent-encoded letter,
 * digit, `-`, `.`, `_` or `~` written out (section 6.2.2.2: `/rest/%63ompanies` is
 * `/rest/companies`), every other escape kept, its hex digits in upper case (section 6.2.2.1:
 * `%2f` is `%2F`). Two paths that normalise alike name the same resource.
 */
export function withNormalPercentEncoding(path: string): string {
  if (!path.includes('%')) return path;
  return path.replace(/%([0-9A-Fa-f]{2})/g, (_escape, hex: string) => {
    const character = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(character) ? character : `%${hex.toUpperCase()}`;
  });
}

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
