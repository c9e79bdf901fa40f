import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import { networkReason } from './quickstart_service.ts';

/**
 * `quickstart --listen`: the demo client's end of the flow, on its redirect URI on loopback. It
 * waits for the browser to come back from the consent page, checks the state, exchanges the code
 * at the service's token endpoint as the guide's step 2 does (PKCE verifier, client_secret_post),
 * and answers the browser with a page saying what happened. An answer that brings no usable code
 * (a refusal, another run's state, an exchange that fails) gets a page and a line saying why, and
 * the listener waits on, so opening the authorization URL again retries.
 *
 * When the service takes only pushed authorization requests (PAR_REQUIRED=on), the URL to open is
 * the listener's own start URL: each time it is opened, the listener pushes the request to
 * /oauth/par as the guide's curl command does and sends the browser on with the request_uri it
 * gets. A request_uri works once, within 60 seconds, so one pushed when the guide is printed would
 * lapse while the person reads it, and a retry would need another.
 */

const CALLBACK_PATH = '/callback';
const START_PATH = '/start';

export interface CodeExchange {
  tokenEndpoint: string;
  clientId: string;
  clientSecret: string;
  codeVerifier: string;
  /** The state the authorization URL carries: an answer with another is not this run's. */
  state: string;
  /** PAR_REQUIRED=on: the request pushed each time the start URL is opened. */
  push?: PushedRequest;
}

export interface PushedRequest {
  /** The service's /oauth/par, where the client authenticates as at the token endpoint. */
  endpoint: string;
  /** Where the browser is sent with the client_id and the request_uri the push answers. */
  authorizationEndpoint: string;
  /** The authorization request's parameters besides client_id (quickstart_guide.ts authorizationRequest). */
  parameters: Record<string, string>;
}

/** The token endpoint's answer (RFC 6749 section 5.1). */
export interface Tokens {
  access_token: string;
  token_type: string;
  expires_in?: number;
  refresh_token?: string;
  id_token?: string;
  scope?: string;
}

export interface CallbackListener {
  /** `http://127.0.0.1:<port>/callback`, with the port the listener got: the demo client's redirect URI. */
  readonly redirectUri: string;
  /** `http://127.0.0.1:<port>/start`: the URL to open when the exchange pushes its request (served only then). */
  readonly startUrl: string;
  /**
   * Resolves with the tokens once the browser brings a code with this run's state and it is
   * exchanged; `report` hears one line for the code received and for each answer that failed.
   */
  exchange(exchange: CodeExchange, report: (line: string) => void): Promise<Tokens>;
  close(): Promise<void>;
}

/** Listens on 127.0.0.1 (port 0: any free one); rejects with the system's error (EADDRINUSE) when it cannot. */
export async function listenForCallback(port: number): Promise<CallbackListener> {
  let handle: (request: IncomingMessage, response: ServerResponse) => void = (_request, response) => {
    answer(response, 503, page('Not ready yet', 'The quickstart is still creating the demo client. Open the authorization URL it prints.'));
  };
  const server = createServer((request, response) => handle(request, response));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const redirectUri = `${origin}${CALLBACK_PATH}`;
  const startUrl = `${origin}${START_PATH}`;

  return {
    redirectUri,
    startUrl,
    exchange: (exchange, report) => new Promise<Tokens>((resolve) => {
      let done = false;
      const served = exchange.push ? [START_PATH, CALLBACK_PATH] : [CALLBACK_PATH];
      handle = (request, response) => {
        const url = new URL(request.url ?? '/', redirectUri);
        if (!served.includes(url.pathname) || request.method !== 'GET') {
          answer(response, 404, page('Not found', `The quickstart answers only at ${served.map((path) => `${origin}${path}`).join(' and ')}.`));
          return;
        }
        if (done) {
          answer(response, 410, page('Already done', 'The quickstart has exchanged its code and stopped listening; the tokens are in its terminal.'));
          return;
        }
        if (url.pathname === START_PATH && exchange.push) {
          void start(response, exchange, exchange.push, report).catch((error: unknown) => broke(response, error, report));
          return;
        }
        void arrival(url.searchParams, { ...exchange, redirectUri }, report).then((outcome) => {
          answer(response, outcome.status, outcome.page);
          if (!('tokens' in outcome)) return report(outcome.line);
          done = true;
          response.once('finish', () => resolve(outcome.tokens));
        }, (error: unknown) => broke(response, error, report));
      };
    }),
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

type Outcome =
  | { tokens: Tokens; status: number; page: string }
  | { line: string; status: number; page: string };

const RETRY = 'Open the authorization URL again to retry, or press Ctrl-C to stop.';

function broke(response: ServerResponse, error: unknown, report: (line: string) => void): void {
  report(`answering the browser failed: ${(error as Error).message}`);
  answer(response, 500, page('Something went wrong', 'The quickstart could not handle this answer; its terminal says why.'));
}

/** The start URL opened: the request pushed, and the browser sent on with its request_uri; or a page and a line saying why not. */
async function start(response: ServerResponse, exchange: CodeExchange, push: PushedRequest, report: (line: string) => void): Promise<void> {
  const body = new URLSearchParams({ client_id: exchange.clientId, client_secret: exchange.clientSecret, ...push.parameters });
  const answered = await post({ url: push.endpoint, name: 'the pushed authorization request endpoint' }, body, 'request_uri');
  if ('problem' in answered) {
    report(`${answered.problem}. ${RETRY}`);
    answer(response, 502, page('The request was not pushed', `The quickstart pushes the authorization request before sending the browser on, and ${answered.problem}. ${RETRY}`));
    return;
  }
  const authorization = new URL(push.authorizationEndpoint);
  authorization.search = new URLSearchParams({ client_id: exchange.clientId, request_uri: String(answered.reply.request_uri) }).toString();
  response.writeHead(303, { Location: authorization.href, 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
  response.end();
}

/** What one arrival at the redirect URI comes to: tokens, or why not (a line for the terminal, a page for the browser). */
async function arrival(query: URLSearchParams, exchange: CodeExchange & { redirectUri: string }, report: (line: string) => void): Promise<Outcome> {
  const error = query.get('error');
  const code = query.get('code');
  if (query.get('state') !== exchange.state) {
    return {
      status: 400,
      line: `an answer came to ${exchange.redirectUri} with another state than this run's (from an older authorization URL?), so it was not used. Open the authorization URL printed above.`,
      page: page('Not this quickstart\'s answer', 'This answer carries another state than the authorization URL the quickstart printed (an older URL, or one from another run), so its code was not used. Open the URL the quickstart printed in its terminal.'),
    };
  }
  if (error !== null) {
    const description = query.get('error_description');
    const said = `${error}${description ? ` (${description})` : ''}`;
    return {
      status: 400,
      line: `the authorization was not granted: ${said}. ${RETRY}`,
      page: page('Not authorized', `The service answered ${said}${error === 'access_denied' ? ': access was not allowed' : ''}, so there is no code to exchange. ${RETRY}`),
    };
  }
  if (code === null) {
    return { status: 400, line: `an answer came to ${exchange.redirectUri} without a code. ${RETRY}`, page: page('No code', `This answer carries no authorization code. ${RETRY}`) };
  }
  report(`Code received: ${code} (with this run's state); exchanging it at ${exchange.tokenEndpoint}`);
  const result = await exchangeCode(code, exchange);
  if ('tokens' in result) {
    return {
      tokens: result.tokens,
      status: 200,
      page: page('It worked', `The service sent this browser back with the authorization code ${code}, and the quickstart exchanged it for tokens at ${exchange.tokenEndpoint}. They are in the terminal where the quickstart runs, which has stopped listening. You can close this tab.`),
    };
  }
  return { status: 502, line: `${result.problem}. ${RETRY}`, page: page('The code was not exchanged', `The code ${code} arrived, but ${result.problem}. ${RETRY}`) };
}

/** Step 2 of the guide: the code, the PKCE verifier and the client's credentials in the body (client_secret_post). */
async function exchangeCode(code: string, exchange: CodeExchange & { redirectUri: string }): Promise<{ tokens: Tokens } | { problem: string }> {
  const body = new URLSearchParams({
    grant_type: 'authorization_code',
    code,
    redirect_uri: exchange.redirectUri,
    client_id: exchange.clientId,
    client_secret: exchange.clientSecret,
    code_verifier: exchange.codeVerifier,
  });
  const answered = await post({ url: exchange.tokenEndpoint, name: 'the token endpoint' }, body, 'access_token');
  return 'problem' in answered ? answered : { tokens: answered.reply as unknown as Tokens };
}

/** A form POST to one of the service's endpoints; its JSON answer when it holds `expected`, otherwise why not, in words. */
async function post(endpoint: { url: string; name: string }, body: URLSearchParams, expected: string): Promise<{ reply: Record<string, unknown> } | { problem: string }> {
  let response: Response;
  try {
    response = await fetch(endpoint.url, { method: 'POST', body, signal: AbortSignal.timeout(10_000) });
  } catch (error) {
    return { problem: `the service does not answer at ${endpoint.url} (${networkReason(error)}): start it (npm start)` };
  }
  const reply = await response.json().catch(() => undefined) as Record<string, unknown> | undefined;
  if (response.ok && reply !== undefined && typeof reply[expected] === 'string') return { reply };
  const refusal = typeof reply?.error === 'string' ? `${reply.error}${typeof reply.error_description === 'string' ? ` (${reply.error_description})` : ''}` : `HTTP ${response.status}`;
  return { problem: `${endpoint.name} refused it: ${refusal}` };
}

function answer(response: ServerResponse, status: number, html: string): void {
  response.writeHead(status, {
    'Content-Type': 'text/html; charset=utf-8',
    'Cache-Control': 'no-store',
    // The page runs nothing and loads nothing but its own style; the address it was reached at holds the code.
    'Content-Security-Policy': `default-src 'none'; style-src '${STYLE_HASH}'`,
    'Referrer-Policy': 'no-referrer',
    'X-Content-Type-Options': 'nosniff',
  });
  response.end(html);
}

/** Readable on a phone: the code and URLs in the text are long words, broken anywhere. */
const STYLE = 'body{font-family:system-ui,sans-serif;line-height:1.5;max-width:40rem;margin:2rem auto;padding:0 1rem}p{overflow-wrap:anywhere}';
const STYLE_HASH = `sha256-${createHash('sha256').update(STYLE).digest('base64')}`;

function page(title: string, text: string): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Quickstart: ${escape(title)}</title><style>${STYLE}</style></head>
<body><main><h1>${escape(title)}</h1><p>${escape(text)}</p></main></body>
</html>
`;
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (character) => ENTITIES[character]!);
}
