import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CredentialProxy {
  /** `http://127.0.0.1:<port>`: what the proxied path is reached at. */
  readonly origin: string;
  stop(): Promise<void>;
}

/**
 * A reverse proxy on loopback that adds `Authorization: Bearer <credential>` to every request and
 * forwards it to `target`'s origin: for a tool that speaks MCP but not OAuth (the MCP conformance
 * suite's server scenarios). A `Host` or `Origin` naming the proxy is rewritten to the target's, as
 * a load balancer does; any other is passed on untouched, so the target's own checks still see it.
 */
export async function startCredentialProxy(target: string, credential: string): Promise<CredentialProxy> {
  const upstream = new URL(target);
  let own = '';
  const server: Server = createServer((incoming, outgoing) => {
    const headers = { ...incoming.headers, authorization: `Bearer ${credential}` };
    if (headers.host === own) headers.host = upstream.host;
    if (headers.origin === `http://${own}`) headers.origin = upstream.origin;
    const forwarded = request({ host: upstream.hostname, port: upstream.port, method: incoming.method, path: incoming.url, headers }, (answer) => {
      outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(outgoing);
    });
    forwarded.on('error', () => outgoing.destroy());
    incoming.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  own = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin: `http://${own}`,
    stop: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
