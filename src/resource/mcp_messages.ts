import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';

/**
 * Why a request body that is JSON (parsed; undefined when it is not JSON) is refused as not a
 * JSON-RPC message: JSON-RPC 2.0 section 5.1 answers it `-32600 Invalid Request`, while the SDK's
 * transport answers every body its schema refuses as a parse error (`-32700`), which is for text
 * that is not JSON. MCP's own rule is the SDK's schema: `jsonrpc: "2.0"`, and a request id that
 * is a string or a number, never null. Undefined for a message, and for a batch, whose messages
 * the transport answers one by one.
 */
export function notAMessage(body: unknown): string | undefined {
  if (body === undefined || Array.isArray(body)) return undefined;
  if (JSONRPCMessageSchema.safeParse(body).success) return undefined;
  return 'Invalid Request: not a JSON-RPC 2.0 request, notification or response (MCP request ids are strings or numbers)';
}
