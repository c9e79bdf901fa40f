import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';

/**
 * A raw HTTP request, sent as given: fetch() normalises too much (it refuses some header values,
 * re-encodes URLs, sets its own Content-Type), and the fuzz tests need to send exactly the bytes
 * a broken or hostile client would.
 */
export interface RawRequest {
  method: string;
  /** Path and query, sent verbatim (latin1 bytes; percent-escapes are not checked), but for what Node refuses to send. */
  path: string;
  /** A header given as an array is sent once per value (a duplicated header). */
  headers?: Record<string, string | string[]>;
  body?: string | Uint8Array;
}

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body decoded as UTF-8 (invalid sequences become U+FFFD). */
  text: string;
}

/** Bodies larger than this are cut: an error page or JSON error is far smaller. */
const MAX_RESPONSE_BYTES = 1 << 20;

/**
 * A connection per request: a kept-alive connection the server closes for being idle just as a
 * request goes out fails with a reset that says nothing about the request.
 */
const agent = new Agent({ keepAlive: false });

/** Sends one request to `origin` (scheme://host:port) and reads the whole answer. */
export function send(origin: string, raw: RawRequest): Promise<RawResponse> {
  const url = new URL(origin);
  const body = typeof raw.body === 'string' ? Buffer.from(raw.body, 'utf8') : raw.body;
  const headers: Record<string, string | string[]> = { ...raw.headers };
  if (body !== undefined && !Object.keys(headers).some((name) => name.toLowerCase() === 'content-length')) {
    headers['content-length'] = String(body.byteLength);
  }
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: url.hostname,
      port: url.port,
      method: raw.method,
      path: sendablePath(raw.path),
      headers,
      agent,
      // Read whatever head the server sends (a redirect can carry a long URL); whether it is too long is for the checks to say.
      maxHeaderSize: 1 << 20,
    }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.byteLength;
        if (size <= MAX_RESPONSE_BYTES) chunks.push(chunk);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') return reject(error);
      // Node answers a request whose head is over its 16 KiB limit with 431 and closes the
      // connection, often before the client has finished writing: the client sees a reset.
      if (headSize(raw) > MAX_HEAD_BYTES) return resolve({ status: 431, headers: {}, text: '' });
      // A body over an endpoint's limit is refused (413) before it is read, and the connection
      // closed under the client still sending it: a reset too, provided the server is still up.
      if ((body?.byteLength ?? 0) > SMALLEST_BODY_LIMIT) {
        stillUp(url).then((up) => (up ? resolve({ status: 413, headers: {}, text: '' }) : reject(error)), reject);
        return;
      }
      reject(error);
    });
    req.end(body);
  });
}

/** Node sends a request target of bytes 0x21-0xff only: anything else is percent-encoded (as UTF-8), as a client would. */
export function sendablePath(path: string): string {
  return path.replace(/[^\x21-\xff]/gu, (char) => [...Buffer.from(char, 'utf8')].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`).join(''));
}

/** The smallest body limit of any endpoint (the authorization endpoint's POST form). */
const SMALLEST_BODY_LIMIT = 8 * 1024;

async function stillUp(url: URL): Promise<boolean> {
  try {
    return (await fetch(new URL('/healthz', url))).ok;
  } catch {
    return false;
  }
}

/** Node's default limit on a request's line and headers (--max-http-header-size). */
const MAX_HEAD_BYTES = 16 * 1024;

function headSize(raw: RawRequest): number {
  let size = raw.method.length + raw.path.length + 12;
  for (const [name, value] of Object.entries(raw.headers ?? {})) {
    for (const one of [value].flat()) size += name.length + one.length + 4;
  }
  return size;
}

/** Closes any connection still open (at the end of a suite, so mocha can exit cleanly). */
export { MAX_HEAD_BYTES };

export function closeConnections(): void {
  agent.destroy();
}
