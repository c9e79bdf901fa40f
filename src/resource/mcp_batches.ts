import { MAX_BATCH_SIZE } from '@modelcontextprotocol/sdk/server/requestBody.js';

/**
 * JSON-RPC batches at `/mcp`. MCP 2025-03-26 had them (a server MUST take an array of messages);
 * 2025-06-18 took them out: from then on a request carries one message. The SDK's transport still
 * takes an array of up to MAX_BATCH_SIZE messages whatever the version, so the endpoint decides
 * here, before the transport reads the body.
 */

/** The first MCP version whose requests carry one JSON-RPC message, never an array. */
const FIRST_VERSION_WITHOUT_BATCHES = '2025-06-18';

/**
 * The version a request without `MCP-Protocol-Version` speaks: the transport specification tells
 * a server that cannot tell otherwise (a stateless one) to assume 2025-03-26.
 */
const VERSION_WITHOUT_HEADER = '2025-03-26';

/**
 * Why a request body (parsed JSON; undefined when it is not JSON) is refused as a batch: an empty
 * array (JSON-RPC 2.0 answers it with one Invalid Request), an array under a protocol version
 * without batches, or one in which two requests share an id. Undefined for a single message, and
 * for any other batch under 2025-03-26 or before. Versions are dates, so they compare as strings.
 */
export function batchRefusal(body: unknown, protocolVersion: string | undefined): string | undefined {
  if (!Array.isArray(body)) return undefined;
  if (body.length === 0) return 'Invalid Request: an empty batch';
  const version = protocolVersion || VERSION_WITHOUT_HEADER;
  if (version >= FIRST_VERSION_WITHOUT_BATCHES) {
    return `Invalid Request: MCP ${version.slice(0, 20)} takes one JSON-RPC message per request, not a batch (batches ended with ${FIRST_VERSION_WITHOUT_BATCHES})`;
  }
  // The transport answers a batch's requests by id: two under one id would both run and only one
  // be answered. MCP never lets a request id be reused, so such a batch runs nothing.
  const ids = requestIdsIn(body);
  if (new Set(ids).size !== ids.length) return 'Invalid Request: two requests of the batch have the same id';
  return undefined;
}

/**
 * How many requests a body counts as against the per-credential rate limit: a batch one per
 * message, as if each had come alone, so a batch buys no more than the limit allows; anything
 * else (a single message, a body that is not JSON) one. A batch larger than the transport takes
 * runs nothing and counts one.
 */
export function requestsIn(body: unknown): number {
  return Array.isArray(body) && body.length <= MAX_BATCH_SIZE ? Math.max(body.length, 1) : 1;
}

/**
 * A batch without the cancellations it carries of its own requests. The transport answers a batch
 * once every request in it is answered, and a cancelled request is never answered (MCP
 * cancellation), so such a batch would never be answered at all: the connection would hang. A
 * batch's requests are answered together in one response, so a cancellation sent with them stops
 * nothing a client could see stop; it is ignored, as a receiver may ignore a cancellation it
 * cannot act on. Anything else is returned as it is.
 */
export function withoutOwnCancellations(body: unknown): unknown {
  if (!Array.isArray(body)) return body;
  const requestIds = new Set<MessageId | undefined>(requestIdsIn(body));
  const kept = body.filter((message) => !requestIds.has(cancelledIdOf(message)));
  return kept.length === body.length ? body : kept;
}

type MessageId = string | number;

/** A JSON-RPC id (a string or a number), or undefined for anything else. */
function messageId(value: unknown): MessageId | undefined {
  return typeof value === 'string' || typeof value === 'number' ? value : undefined;
}

/** The id of a JSON-RPC request (a method and an id), or undefined for any other message. */
function requestIdOf(message: unknown): MessageId | undefined {
  const { id, method } = (message ?? {}) as { id?: unknown; method?: unknown };
  return typeof method === 'string' ? messageId(id) : undefined;
}

/** The ids of a batch's requests, in order (its notifications and answers have none). */
function requestIdsIn(batch: unknown[]): MessageId[] {
  return batch.map(requestIdOf).filter((id) => id !== undefined);
}

/** The request a `notifications/cancelled` names, or undefined for any other message. */
function cancelledIdOf(message: unknown): MessageId | undefined {
  const { method, params } = (message ?? {}) as { method?: unknown; params?: { requestId?: unknown } };
  return method === 'notifications/cancelled' ? messageId(params?.requestId) : undefined;
}
