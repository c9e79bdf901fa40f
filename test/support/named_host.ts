import { request } from 'node:http';

/**
 * A request with a `Host` header of the test's choosing (fetch always sends the URL's), answered
 * without following redirects: how a browser that reached the server under another name asks.
 */
export function requestNaming(host: string, url: string, method = 'GET', headers: Record<string, string> = {}): Promise<{ status: number; location: string | undefined }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(url, { method, headers: { ...headers, host } }, (incoming) => {
      incoming.resume();
      incoming.on('end', () => resolve({ status: incoming.statusCode ?? 0, location: incoming.headers.location }));
      incoming.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}
