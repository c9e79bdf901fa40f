import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How the server answers one path: a JSON document, or anything a handler writes. */
export type DocumentRoute = Record<string, unknown> | ((request: IncomingMessage, response: ServerResponse) => void);

export interface DocumentServer {
  /** `https://localhost:<port>`. */
  readonly origin: string;
  readonly port: number;
  /** Answers `path` from now on. */
  serve(path: string, route: DocumentRoute, headers?: Record<string, string>): void;
  /** TCP connections made to the server so far (a refusal before any connection leaves it at 0). */
  connections(): number;
  /** GET requests for `path` so far. */
  requests(path: string): number;
  stop(): Promise<void>;
}

/**
 * An https server on loopback with the test's throwaway certificate (test/support/tls.ts): where a
 * client's metadata document lives. It counts connections and requests, so a test can show that a
 * refused client_id was never fetched.
 */
export async function startDocumentServer(tls: { key: string; cert: string }, host = '127.0.0.1'): Promise<DocumentServer> {
  const routes = new Map<string, { route: DocumentRoute; headers: Record<string, string> }>();
  const counts = new Map<string, number>();
  let connections = 0;
  const server: Server = createServer(tls, (request, response) => {
    const path = new URL(request.url ?? '/', 'https://localhost').pathname;
    counts.set(path, (counts.get(path) ?? 0) + 1);
    const found = routes.get(path);
    if (!found) {
      response.writeHead(404).end();
      return;
    }
    if (typeof found.route === 'function') {
      found.route(request, response);
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json', ...found.headers }).end(JSON.stringify(found.route));
  });
  server.on('connection', () => { connections += 1; });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `https://localhost:${port}`,
    port,
    serve: (path, route, headers = {}) => { routes.set(path, { route, headers }); },
    connections: () => connections,
    requests: (path) => counts.get(path) ?? 0,
    stop: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
