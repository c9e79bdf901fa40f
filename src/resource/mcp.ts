import { Readable } from 'node:stream';

import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { readRequestBody, requestBodyTooLargeMessage } from '@modelcontextprotocol/sdk/server/requestBody.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import compose from 'koa-compose';

import type { RecordStore } from '../../adapters/store.ts';
import { isEncodedBody } from '../shared/content_coding.ts';
import { noStore } from '../shared/no_store.ts';
import { requestedHost } from '../shared/requested_host.ts';
import { authenticate, type Authenticators } from './authenticate.ts';
import { bearerCors } from './cors.ts';
import { batchRefusal, requestsIn, withoutOwnCancellations } from './mcp_batches.ts';
import { invalidParams, notAMessage } from './mcp_messages.ts';
import { TOOL_NAMES, workspaceDataServer, type ToolFault } from './mcp_tools.ts';
import { MetadataApi } from './metadata.ts';
import type { IdempotentCreates } from './idempotency.ts';
import { CoreApi } from './records.ts';

/** The MCP transport's own headers, which a browser-based host sends and reads. */
const MCP_HEADERS = ['Mcp-Protocol-Version', 'Mcp-Session-Id', 'Last-Event-ID'];

/** The largest JSON-RPC request the endpoint reads: a record's fields fit many times over. */
const BODY_LIMIT = 128 * 1024;

export interface McpDependencies extends Authenticators {
  records: RecordStore;
  /** How creates under an idempotency key are kept (keys derived from the key-encryption keys). */
  idempotentCreates: IdempotentCreates;
  /** Where the endpoint is: `{issuer path}/mcp`. */
  mcpPath: string;
  /** Where the data API is (`{issuer path}/rest`): describe_objects names each object's path there. */
  restPath: string;
  /** The `Host` values a request may name: the issuer's (DNS rebinding protection). */
  allowedHosts: readonly string[];
  /** A proxy stands in front (TRUST_PROXY): the name asked for is its `X-Forwarded-Host` when it sends one. */
  trustProxy: boolean;
  /** The `Origin` values a browser's request may carry: the issuer's, and those the operator allows (MCP_ALLOWED_ORIGINS). */
  allowedOrigins: readonly string[];
  /**
   * Runs once the request is authenticated: the per-credential rate limit the data API counts
   * too; run again for each further message of a batch, which counts as requests of its own.
   */
  rateLimit?: Middleware;
}

/**
 * `/mcp`: the workspace data for MCP hosts and agents (MCP streamable HTTP, stateless), a protected
 * resource of its own: its tokens have `aud` `{BASE_URL}/mcp` (RFC 8707), a token for another API
 * is refused, and a request without a credential gets 401 with the `resource_metadata` challenge
 * (RFC 9728), from which an MCP client finds this authorization server. API keys work as at the
 * data API. In order: CORS, the DNS rebinding checks (a `Host` or `Origin` not the service's: 403),
 * authentication, the rate limit, the body read (a batch refused or counted, and kept from
 * cancelling its own requests: mcp_batches.ts), then an MCP server made for the request
 * (src/resource/mcp_tools.ts) answers it through the SDK's transport; the response waits for the
 * store's commit like every other.
 *
 * The transport answers in JSON (enableJsonResponse), so its answer is whole before anything is
 * written: a tool that fails other than by a refusal (the store down) makes the request's answer
 * the host's for that error, as at the data API (an outage 503 with Retry-After, anything else a
 * 500 without its detail, both logged), not a tool result carrying the error's text.
 */
export function mcpEndpoint(deps: McpDependencies): Middleware {
  const core = new CoreApi(deps.records, deps.idempotentCreates);
  const metadata = new MetadataApi(deps.restPath);
  const router = new Router({ prefix: deps.mcpPath });
  router.use(refuseRebinding(deps.allowedHosts, deps.allowedOrigins, deps.trustProxy), authenticate(deps));
  if (deps.rateLimit) router.use(deps.rateLimit);
  router.post('/', async (ctx) => {
    if (isEncodedBody(ctx.get('Content-Encoding'))) return refuseEncoding(ctx);
    const text = await bodyText(ctx);
    if (text === undefined) return;
    const message = parsedJson(text);
    const refusal = notAMessage(message) ?? batchRefusal(message, ctx.get('Mcp-Protocol-Version'));
    if (refusal) return answerRpcError(ctx, 400, -32600, refusal);
    const invalid = invalidParams(message, TOOL_NAMES);
    // Answered as the transport answers a request's error: 200, under the request's id.
    if (invalid) return answerRpcError(ctx, 200, -32602, invalid, (message as { id: string | number }).id);
    if (deps.rateLimit) await countFurther(deps.rateLimit, ctx, requestsIn(message) - 1);
    await answerThroughTransport(ctx, (onFault) => workspaceDataServer(ctx.state.principal!, core, metadata, onFault), text, withoutOwnCancellations(message));
  });
  router.all('/', onlyPost);
  return compose([
    bearerCors('POST', MCP_HEADERS),
    async (ctx, next) => {
      noStore(ctx);
      await next();
    },
    router.routes() as Middleware,
  ]);
}

/**
 * The endpoint is stateless (no session, nothing the server sends unasked), so it answers POST
 * alone. The MCP transport lets a server answer 405 to the GET that opens an event stream and to
 * the DELETE that ends a session; an empty stream instead makes a client open it again and again.
 */
const onlyPost: Middleware = (ctx) => {
  ctx.set('Allow', 'POST');
  answerRpcError(ctx, 405, -32000, 'Method not allowed: this MCP endpoint is stateless and answers POST only');
};

/** The transport reads a body as it comes: one in a content coding is refused (isEncodedBody). */
function refuseEncoding(ctx: Context): void {
  ctx.set('Accept-Encoding', 'identity');
  answerRpcError(ctx, 415, -32000, 'Unsupported Media Type: send the body unencoded (Content-Encoding: identity)');
}

/** A refusal as the SDK's transport writes its own: a JSON-RPC error answering the request `id`, or no message in particular. */
function answerRpcError(ctx: Context, status: number, code: number, message: string, id: string | number | null = null): void {
  ctx.status = status;
  ctx.body = { jsonrpc: '2.0', error: { code, message }, id };
}

/**
 * The request's body, up to BODY_LIMIT, read as the SDK's transport reads it; or undefined, the
 * request answered as the transport answers it: too large (413), or cut short (400, as a body
 * that is not JSON).
 */
async function bodyText(ctx: Context): Promise<string | undefined> {
  try {
    const read = await readRequestBody(webRequest(ctx, Readable.toWeb(ctx.req) as ReadableStream<Uint8Array>), BODY_LIMIT);
    if (!read.tooLarge) return read.text;
    answerRpcError(ctx, 413, -32000, requestBodyTooLargeMessage(BODY_LIMIT));
  } catch {
    answerRpcError(ctx, 400, -32700, 'Parse error: Invalid JSON');
  }
  return undefined;
}

/**
 * Answers the request with the MCP server `serverFor` makes, through the SDK's transport: `text`
 * the body, `message` the body parsed (undefined when it is not JSON: the transport reads `text`
 * and refuses it in its own words). A fault in a tool is thrown once the transport has answered,
 * in place of its answer, for the error mapping to answer and log.
 */
async function answerThroughTransport(ctx: Context, serverFor: (onFault: ToolFault) => McpServer, text: string, message: unknown): Promise<void> {
  const faults: unknown[] = [];
  const server = serverFor((error) => faults.push(error));
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true, maxRequestBodySize: BODY_LIMIT });
  await server.connect(transport);
  try {
    const response = await transport.handleRequest(webRequest(ctx, text), message === undefined ? undefined : { parsedBody: message });
    if (faults.length > 0) throw faults[0];
    await answerWith(ctx, response, Array.isArray(message));
  } finally {
    await server.close();
  }
}

/** Runs the rate limit `times` more for the request (each further message of a batch), refusing it with 429 once past the limit. */
async function countFurther(rateLimit: Middleware, ctx: Context, times: number): Promise<void> {
  for (let counted = 0; counted < times; counted++) await rateLimit(ctx, async () => undefined);
}

/** The body as JSON, or undefined when it is not JSON. */
function parsedJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * The `Host` values `/mcp` answers: the issuer's, and the loopback names of the port the service
 * listens on (a client on the same machine, an instance reached past its load balancer). A page
 * whose name was rebound to this service sends its own name, never one of these.
 */
export function mcpHosts(issuer: string, port: number): string[] {
  return [...new Set([new URL(issuer).host, `localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`])];
}

/**
 * The MCP transport's DNS rebinding protection, before anything else: a page on another site that
 * got its name to resolve to this service sends its own `Host`, and a browser always sends its
 * page's `Origin`. Behind a trusted proxy the name is the one the proxy reports the client asked
 * for (its `X-Forwarded-Host`), as the pages read it. Refused as the SDK refuses them (403, a
 * JSON-RPC error).
 */
function refuseRebinding(allowedHosts: readonly string[], allowedOrigins: readonly string[], trustProxy: boolean): Middleware {
  return async (ctx, next) => {
    const host = requestedHost(ctx, trustProxy);
    const origin = ctx.get('Origin');
    // A host name is case-insensitive; the allowed ones are written in lower case (URL's host).
    const refusal = !host || !allowedHosts.includes(host.toLowerCase()) ? `Invalid Host header: ${host || '(none)'}`
      : origin && !allowedOrigins.includes(origin) ? `Invalid Origin header: ${origin}` : undefined;
    if (!refusal) return next();
    answerRpcError(ctx, 403, -32000, refusal.slice(0, 300));
  };
}

/** The Koa request (a POST) as a web Request with `body`: the stream to read, or the body once read. */
function webRequest(ctx: Context, body: ReadableStream<Uint8Array> | string): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(ctx.req.headers)) {
    if (value !== undefined && name !== 'host') headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  if (acceptsBothAnswerTypes(ctx)) headers.set('accept', BOTH_ANSWER_TYPES);
  return new Request(ctx.href, { method: ctx.method, headers, body, duplex: 'half' } as RequestInit);
}

/** The media types the MCP transport asks a client to accept, as the transport reads them. */
const BOTH_ANSWER_TYPES = 'application/json, text/event-stream';

/**
 * Whether the request's `Accept` takes both of the transport's answer types as RFC 9110 section
 * 12.5.1 reads it: names matched whatever their case, ranges (`*\/*`, `application/*`) included.
 * The transport compares the header's text, so a client sending `*\/*` or `Application/JSON` was
 * answered 406; it is handed the two names instead. A request without the header still is
 * (the MCP transport requires a client to send it).
 */
function acceptsBothAnswerTypes(ctx: Context): boolean {
  return ctx.get('accept') !== '' && ctx.accepts('application/json') !== false && ctx.accepts('text/event-stream') !== false;
}

/** The transport's answer as Koa's: JSON read whole (so it waits for the store's commit), an event stream piped. */
async function answerWith(ctx: Context, response: Response, batch: boolean): Promise<void> {
  ctx.status = response.status;
  response.headers.forEach((value, name) => {
    if (name !== 'content-length') ctx.set(name, value);
  });
  if (!response.body) {
    // Empty, not null: Koa would turn a null body's 202 (a notification accepted) into 204.
    ctx.body = '';
    return;
  }
  if (response.headers.get('content-type')?.startsWith('text/event-stream')) {
    ctx.body = Readable.fromWeb(response.body as import('node:stream/web').ReadableStream);
    return;
  }
  const body = Buffer.from(await response.arrayBuffer());
  ctx.body = batch && response.status === 200 ? asBatchAnswer(body) : body;
}

/**
 * JSON-RPC 2.0 section 6: a batch is answered with an array, one answer a request, however few;
 * the SDK's transport answers a batch holding one request with that answer alone, which a client
 * matching the answers to its batch would not find.
 */
function asBatchAnswer(body: Buffer): Buffer {
  const answer = JSON.parse(body.toString('utf8')) as unknown;
  return Array.isArray(answer) ? body : Buffer.from(JSON.stringify([answer]));
}
