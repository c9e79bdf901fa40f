import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

import { HttpError } from '../shared/http_error.ts';
import type { MetadataApi } from './metadata.ts';
import { OBJECTS, objectNamed, type ObjectDefinition } from './objects.ts';
import type { Principal } from './principal.ts';
import type { CoreApi } from './records.ts';

/** The tools every server made here offers, by name (a call naming another is refused: mcp_messages.ts). */
export const TOOL_NAMES: ReadonlySet<string> = new Set(['describe_objects', 'list_records', 'get_record', 'create_record', 'update_record', 'delete_record']);

/** What the MCP server reports of itself in `initialize`. */
const SERVER_INFO = { name: 'workspace-data', version: '1.0.0' };

const OBJECT_NAMES = OBJECTS.map((object) => object.namePlural) as [string, ...string[]];
const objectArgument = z.enum(OBJECT_NAMES).describe(`The object type: ${OBJECT_NAMES.join(' or ')}`);
const idArgument = z.string().max(64).describe('The record\'s id (a UUID)');
const fieldsArgument = z.record(z.string(), z.unknown()).describe('The fields to set, by name, as describe_objects lists them (null clears one)');

/**
 * Told of what went wrong in a tool that is not a refusal (a store outage, a fault of the
 * service's), for the endpoint to answer the request as the host answers such an error.
 */
export type ToolFault = (error: unknown) => void;

/**
 * The tool result of a fault. The endpoint answers the request with the fault instead, so no
 * client reads this; it says nothing of the fault all the same.
 */
const FAULT_RESULT: CallToolResult = { isError: true, content: [{ type: 'text', text: 'the server could not complete the request' }] };

/**
 * The workspace data as MCP tools, for one request's principal (the MCP endpoint is stateless: a
 * server is made for each request). Every tool is the Core or Metadata API operation of the same
 * name, with its validation, the principal's role and workspace isolation; a refusal is a tool
 * error saying what the data API would have said. Anything else that goes wrong goes to `onFault`:
 * the SDK would otherwise make the error's own message the tool's result.
 */
export function workspaceDataServer(principal: Principal, core: CoreApi, metadata: MetadataApi, onFault: ToolFault): McpServer {
  const server = new McpServer(SERVER_INFO, { capabilities: { tools: {} } });
  const answer = answering(onFault);
  const object = (name: string): ObjectDefinition => objectNamed(name)!;

  server.registerTool('describe_objects', {
    title: 'Describe the object types',
    description: 'The object types of the workspace (companies, people) and their fields: names, types, which are required, which are read-only.',
    annotations: { readOnlyHint: true },
  }, () => answer(async () => metadata.list()));

  server.registerTool('list_records', {
    title: 'List records',
    description: 'Records of one object type in the workspace, in creation order, a page at a time; pass the previous page\'s endCursor as starting_after for the next.',
    inputSchema: {
      object: objectArgument,
      limit: z.number().int().min(1).max(100).optional().describe('How many records at most (1 to 100, default 20)'),
      starting_after: z.string().max(200).optional().describe('The endCursor of the previous page'),
    },
    annotations: { readOnlyHint: true },
  }, (args) => answer(() => core.list(principal, object(args.object), {
    limit: args.limit === undefined ? undefined : String(args.limit),
    startingAfter: args.starting_after,
  })));

  server.registerTool('get_record', {
    title: 'Get a record',
    description: 'One record of the workspace by its id.',
    inputSchema: { object: objectArgument, id: idArgument },
    annotations: { readOnlyHint: true },
  }, (args) => answer(() => core.get(principal, object(args.object), args.id)));

  server.registerTool('create_record', {
    title: 'Create a record',
    description: 'Creates a record in the workspace with the fields given (the required ones at least). Give an idempotency_key to retry safely: a call repeated with the same key and fields within 24 hours returns the record the first made instead of making another.',
    inputSchema: {
      object: objectArgument,
      fields: fieldsArgument,
      idempotency_key: z.string().min(1).max(255).optional().describe('Any unique string (a UUID) for this create, the same on every retry of it'),
    },
  }, (args) => answer(async () => (await core.create(principal, object(args.object), args.fields, args.idempotency_key)).body));

  server.registerTool('update_record', {
    title: 'Update a record',
    description: 'Changes only the fields given of one record of the workspace.',
    inputSchema: { object: objectArgument, id: idArgument, fields: fieldsArgument },
    annotations: { idempotentHint: true },
  }, (args) => answer(() => core.update(principal, object(args.object), args.id, args.fields)));

  server.registerTool('delete_record', {
    title: 'Delete a record',
    description: 'Deletes one record of the workspace.',
    inputSchema: { object: objectArgument, id: idArgument },
    annotations: { destructiveHint: true, idempotentHint: true },
  }, (args) => answer(() => core.delete(principal, object(args.object), args.id)));

  // The SDK offers notifications of a changed tool list with the first tool; this endpoint is
  // stateless (POST only, no stream) and its tools never change, so it would never send one.
  server.server.registerCapabilities({ tools: { listChanged: false } });
  return server;
}

/**
 * An operation's body as the tool's result (text and structured), its refusal (a 4xx HttpError)
 * as a tool error; anything else, a 5xx HttpError included, is a fault, told to `onFault`.
 */
function answering(onFault: ToolFault): (operation: () => Promise<Record<string, unknown>>) => Promise<CallToolResult> {
  return async (operation) => {
    try {
      const body = await operation();
      return { content: [{ type: 'text', text: JSON.stringify(body) }], structuredContent: body };
    } catch (error) {
      if (!(error instanceof HttpError) || error.status >= 500) {
        onFault(error);
        return FAULT_RESULT;
      }
      return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error: error.code, error_description: error.description }) }] };
    }
  };
}
