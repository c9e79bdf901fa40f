const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * The suite requires https for every endpoint and URL the OP publishes. This runner also accepts
 * plain http on a loopback host, so a deployment can be checked on the machine it runs on before
 * it is put behind TLS; that is its one relaxation, and it never applies to other hosts.
 */
export function isHttpsOrLoopback(value: string): boolean {
  const url = URL.parse(value);
  if (!url) return false;
  return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname));
}

export const HTTPS_RULE = 'https (http only on a loopback host)';
