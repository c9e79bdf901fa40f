import { LOOPBACK_HOSTS } from '../../config/parsers.ts';

const WEB_SCHEMES = new Set(['http:', 'https:']);

/**
 * RFC 8252: a client is native only when every redirect URI it has is loopback http (section 7.3:
 * its port changes from run to run) or a private-use scheme (7.1). As a native client any
 * loopback port matches, and the engine asks the user every time (8.6: another app on the device
 * could use the same client_id). A client that also has an https redirect URI is a web client (the
 * RFC 7591 default): every URI matches exactly, port included. A web app in development on
 * loopback keeps exact matching and silent sign-in by registering application_type web.
 */
export function isNativeRedirectSet(uris: unknown): boolean {
  if (!Array.isArray(uris) || uris.length === 0) return false;
  return uris.every((uri) => {
    const url = typeof uri === 'string' ? URL.parse(uri) : null;
    if (!url) return false;
    return url.protocol === 'http:' ? LOOPBACK_HOSTS.has(url.hostname) : !WEB_SCHEMES.has(url.protocol);
  });
}
