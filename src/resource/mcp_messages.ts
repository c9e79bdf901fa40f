import Bourne from '@hapi/bourne';
import { CallToolRequestSchema, InitializeRequestSchema, JSONRPCMessageSchema, ListToolsRequestSchema, PingRequestSchema } from '@modelcontextprotocol/sdk/types.js';

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

/** The requests the endpoint answers, by method, with the schema the SDK reads each with. */
const REQUEST_SCHEMAS: Readonly<Record<string, { safeParse(value: unknown): { success: boolean; error?: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> } } }>> = {
  initialize: InitializeRequestSchema,
  ping: PingRequestSchema,
  'tools/list': ListToolsRequestSchema,
  'tools/call': CallToolRequestSchema,
};

/**
 * Why a request is refused for its params, JSON-RPC `-32602 Invalid params`, as MCP's tools
 * section asks of a call naming an unknown tool and of params its schema refuses: the SDK answers
 * the first as a tool result (`isError`), the second as `-32603 Internal error`, an error of the
 * server's. For one request sent alone; undefined for anything else (a notification, a batch, a
 * method the SDK answers `-32601` itself). `toolNames`: the tools the server offers.
 */
export function invalidParams(body: unknown, toolNames: ReadonlySet<string>): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !('id' in body)) return undefined;
  // Refused as the data API refuses it: the SDK's schemas would drop it without a word.
  if (holdsPrototypeKey(body)) return 'Invalid params: __proto__: no object has such a field';
  const { method } = body as { method?: unknown };
  const schema = typeof method === 'string' && Object.hasOwn(REQUEST_SCHEMAS, method) ? REQUEST_SCHEMAS[method] : undefined;
  if (!schema) return undefined;
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error?.issues[0];
    const where = issue?.path.map(String).join('.') || 'params';
    return `Invalid params: ${method} ${where}: ${issue?.message ?? 'does not match the method\'s params'}`.slice(0, 300);
  }
  if (method !== 'tools/call') return undefined;
  const name = String((body as { params?: { name?: unknown } }).params?.name);
  return toolNames.has(name) ? undefined : `Unknown tool: ${name.slice(0, 100)} (the tools are ${[...toolNames].join(', ')})`;
}

/** Whether a parsed message holds a `__proto__` key anywhere (JSON.parse keeps one as an own property). */
function holdsPrototypeKey(body: object): boolean {
  try {
    Bourne.scan(body, { protoAction: 'error' });
    return false;
  } catch {
    return true;
  }
}
