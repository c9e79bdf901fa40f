import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';

/**
 * Why a request body that is JSON (parsed; undefined when it is not JSON) is refused as not a
 * JSON-RPC message: JSON-RPC 2.0 section 5.1 answers it `-32600 Invalid Request`, while the SDK's
 * transport answers every body its schema refuses as a parse error (`-32700`), which is for text
 * that is not JSON. MCP's own rule is the SDK's schema: `jsonrpc: "2.0"`, and a request id that
 * is a string or an integer, never null. A batch holding one that is not a message is refused whole,
 * as the transport refuses it (none of its messages runs), with the code JSON-RPC gives it.
 * Undefined for a message, and for a batch of messages.
 */
export function notAMessage(body: unknown): string | undefined {
  if (body === undefined) return undefined;
  if (Array.isArray(body)) {
    const index = body.findIndex((element) => !isMessage(element));
    return index === -1 ? undefined : `Invalid Request: element ${index} of the batch is not a JSON-RPC 2.0 request, notification or response (MCP request ids are strings or integers); none of the batch ran`;
  }
  if (isMessage(body)) return undefined;
  return 'Invalid Request: not a JSON-RPC 2.0 request, notification or response (MCP request ids are strings or integers)';
}

function isMessage(value: unknown): boolean {
  return JSONRPCMessageSchema.safeParse(value).success;
}
