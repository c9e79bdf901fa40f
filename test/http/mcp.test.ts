import { request } from 'node:http';
import { DatabaseSync } from 'node:sqlite';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { expect } from 'chai';
import { decodeJwt } from 'jose';

import { clientCredentialsToken, createApiKey, memberOf, userAccessToken } from '../support/data_api.ts';
import { registerClient, type RegisteredClient } from '../support/oauth.ts';
import { seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { eventually, sleep } from '../support/wait.ts';
import { TOOL_NAMES } from '../../src/resource/mcp_tools.ts';

/**
 * `/mcp` over HTTP, as any MCP host speaks it (JSON-RPC over streamable HTTP, stateless): a
 * protected resource of its own (RFC 8707 audience, RFC 9728 metadata and challenge), the same
 * roles, validation and workspace isolation as the Core API, API keys accepted, and the MCP
 * transport's DNS rebinding checks. The stock SDK client runs in test/interop/mcp_cimd.test.ts.
 */

interface RpcAnswer {
  status: number;
  headers: Headers;
  body: { result?: Record<string, unknown>; error?: { code: number; message: string } } & Record<string, unknown>;
}

interface ToolResult {
  isError?: boolean;
  content: Array<{ type: string; text: string }>;
  structuredContent?: Record<string, unknown>;
}

/** A POST as it is written: the `Host` given is the one sent. */
function post(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; headers: Headers; text: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(url, { method: 'POST', headers: { 'content-length': String(Buffer.byteLength(body)), ...headers } }, (incoming) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.on('end', () => {
        const answered = new Headers();
        for (const [name, value] of Object.entries(incoming.headers)) if (value !== undefined) answered.set(name, Array.isArray(value) ? value.join(', ') : value);
        resolve({ status: incoming.statusCode ?? 0, headers: answered, text: Buffer.concat(chunks).toString() });
      });
      incoming.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

/** The server's log lines of one request. */
function linesOf(server: TestServer, requestId: string): Array<Record<string, unknown>> {
  return server.logs().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.request_id === requestId);
}

/** A JSON-RPC request as it is written in a body (one message of a batch, or the body itself). */
function message(id: number, method: string, params: Record<string, unknown> = {}): Record<string, unknown> {
  return { jsonrpc: '2.0', id, method, params };
}

function createCompany(id: number, name: string): Record<string, unknown> {
  return message(id, 'tools/call', { name: 'create_record', arguments: { object: 'companies', fields: { name } } });
}

describe('the MCP endpoint (/mcp)', function () {
  this.timeout(60_000);

  let server: TestServer;
  let client: RegisteredClient;
  let mcpUrl: string;
  let admin: SeededUser;
  let viewer: SeededUser;
  let workspace: string;
  const credentials: Record<string, string> = {};

  before(async () => {
    server = await startServer({ env: { MCP_ALLOWED_ORIGINS: 'https://host.example' } });
    mcpUrl = `${server.issuer}/mcp`;
    client = await registerClient(server.issuer);
    admin = await seedUser(server, [{ workspace: 'MCP A', role: 'admin' }]);
    workspace = admin.workspaces[0]!.id;
    viewer = await memberOf(server, workspace, 'viewer');
    const other = await seedUser(server, [{ workspace: 'MCP B', role: 'admin' }]);
    credentials.admin = (await userAccessToken(server, client, admin, 'api', mcpUrl)).access_token;
    credentials.viewer = (await userAccessToken(server, client, viewer, 'api', mcpUrl)).access_token;
    credentials.machine = (await clientCredentialsToken(server, workspace, mcpUrl)).access_token;
    credentials.key = (await createApiKey(server, workspace)).key;
    credentials.otherKey = (await createApiKey(server, other.workspaces[0]!.id)).key;
    credentials.dataApi = (await userAccessToken(server, client, admin, 'api')).access_token;
  });

  after(async () => {
    await server?.stop();
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.error(server.logs().split('\n').slice(-30).join('\n'));
  });

  /** One JSON-RPC request over HTTP (node:http: fetch would not send another `Host`). */
  async function rpc(method: string, params: Record<string, unknown> = {}, credential?: string, headers: Record<string, string> = {}): Promise<RpcAnswer> {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
    const { status, headers: answered, text } = await post(mcpUrl, {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      ...(credential ? { authorization: `Bearer ${credential}` } : {}),
      ...headers,
    }, body);
    return { status, headers: answered, body: text ? JSON.parse(text) : {} };
  }

  /** A body sent as given, under `version` (none: no MCP-Protocol-Version). */
  async function send(credential: string, body: string, version?: string): Promise<{ status: number; headers: Headers; text: string }> {
    return post(mcpUrl, {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${credential}`,
      ...(version ? { 'mcp-protocol-version': version } : {}),
    }, body);
  }

  async function tool(credential: string, name: string, args: Record<string, unknown>): Promise<ToolResult> {
    const answer = await rpc('tools/call', { name, arguments: args }, credential);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    return answer.body.result as unknown as ToolResult;
  }

  it('asks for a credential with 401 naming its own protected resource metadata, which names this issuer and the api scope', async () => {
    const answer = await rpc('tools/list');
    expect(answer.status).to.equal(401);
    const challenge = answer.headers.get('www-authenticate')!;
    const metadataUrl = `${server.origin}/.well-known/oauth-protected-resource/mcp`;
    expect(challenge).to.match(/^Bearer /).and.include(`resource_metadata="${metadataUrl}"`);
    // The MCP specification's scope selection: a client asks first for the scope the challenge names.
    expect(challenge).to.include('scope="api"').and.not.include('error=');
    const metadata = await (await fetch(metadataUrl)).json() as Record<string, unknown>;
    expect(metadata).to.deep.include({ resource: mcpUrl, authorization_servers: [server.issuer], scopes_supported: ['api'] });
  });

  it('answers initialize, offering no notification it could not send, and lists the six tools, each with its input schema', async () => {
    const initialized = await rpc('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'test', version: '1' } }, credentials.machine);
    expect(initialized.status).to.equal(200);
    expect(initialized.body.result).to.deep.include({ serverInfo: { name: 'workspace-data', version: '1.0.0' } });
    expect(initialized.body.result!.capabilities, 'no tool list notifications, which a stateless endpoint never sends').to.deep.equal({ tools: { listChanged: false } });
    const listed = await rpc('tools/list', {}, credentials.machine);
    const tools = (listed.body.result as { tools: Array<{ name: string; inputSchema: { properties?: Record<string, unknown> } }> }).tools;
    expect(tools.map(({ name }) => name).sort()).to.deep.equal(['create_record', 'delete_record', 'describe_objects', 'get_record', 'list_records', 'update_record']);
    expect(tools.find(({ name }) => name === 'get_record')!.inputSchema.properties).to.have.keys('object', 'id');
  });

  it('takes an Accept that admits both of the transport\'s answer types however it is written (RFC 9110 12.5.1: any case, ranges); one that admits one of them is still 406', async () => {
    for (const accept of ['Application/JSON, Text/Event-Stream', '*/*', 'application/*, text/*', 'text/event-stream;q=0.5, application/json']) {
      const listed = await rpc('tools/list', {}, credentials.machine, { accept });
      expect(listed.status, accept).to.equal(200);
      expect(listed.body.result, accept).to.have.property('tools');
    }
    for (const accept of ['application/json', 'text/event-stream', 'text/html']) {
      expect((await rpc('tools/list', {}, credentials.machine, { accept })).status, accept).to.equal(406);
    }
  });

  it('takes tokens issued for /mcp (user and client credentials) and API keys; refuses a token for the data API', async () => {
    expect(decodeJwt(credentials.admin!).aud).to.equal(mcpUrl);
    for (const name of ['admin', 'viewer', 'machine', 'key']) {
      const listed = await tool(credentials[name]!, 'list_records', { object: 'companies' });
      expect(listed.isError ?? false, name).to.equal(false);
    }
    const refused = await rpc('tools/list', {}, credentials.dataApi);
    expect(refused.status).to.equal(401);
    expect(refused.headers.get('www-authenticate')).to.include('error="invalid_token"');
    expect(refused.body).to.include({ error: 'invalid_token' });
  });

  it('tells a client that sent a good token issued for another API so, and how to ask for one for this one (/mcp, the data API, userinfo)', async () => {
    const dataApi = `${server.issuer}/rest`;
    const atMcp = await rpc('tools/list', {}, credentials.dataApi);
    expect(atMcp.status).to.equal(401);
    expect(atMcp.body).to.include({ error: 'invalid_token' });
    expect(atMcp.body.error_description).to.include(`issued for ${dataApi}`).and.include(`resource=${mcpUrl}`);
    const atDataApi = await fetch(`${dataApi}/companies`, { headers: { authorization: `Bearer ${credentials.admin}` } });
    expect(atDataApi.status).to.equal(401);
    expect(((await atDataApi.json()) as { error_description: string }).error_description).to.include(`issued for ${mcpUrl}`).and.include(`resource=${dataApi}`);
    const atUserinfo = await fetch(`${server.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${credentials.admin}` } });
    expect(atUserinfo.status).to.equal(401);
    expect(((await atUserinfo.json()) as { error_description: string }).error_description).to.include('userinfo takes tokens issued for').and.include(`resource=${dataApi}`);
    // A token this server did not issue, or one revoked, learns nothing of where it might work.
    const forged = await rpc('tools/list', {}, `${credentials.dataApi.slice(0, -4)}AAAA`);
    expect(forged.body.error_description).to.equal('the access token is invalid, expired or revoked');
  });

  it('refuses a token without the api scope with 403 insufficient_scope naming it and its metadata (step-up)', async () => {
    const { access_token: narrow } = await userAccessToken(server, client, admin, 'openid profile', mcpUrl);
    const refused = await rpc('tools/list', {}, narrow);
    expect(refused.status, JSON.stringify(decodeJwt(narrow))).to.equal(403);
    expect(refused.headers.get('www-authenticate')).to.include('error="insufficient_scope"').and.include('scope="api"')
      .and.include(`resource_metadata="${server.origin}/.well-known/oauth-protected-resource/mcp"`);
  });

  it('creates, reads, lists, updates and deletes a record as the Core API does', async () => {
    const created = await tool(credentials.admin!, 'create_record', { object: 'companies', fields: { name: 'Over MCP', employees: 4 } });
    expect(created.isError ?? false, created.content[0]?.text).to.equal(false);
    const company = (created.structuredContent as { data: { company: { id: string; name: string } } }).data.company;
    expect(company.name).to.equal('Over MCP');
    expect(JSON.parse(created.content[0]!.text)).to.deep.equal(created.structuredContent);

    const rest = await fetch(`${server.issuer}/rest/companies/${company.id}`, { headers: { authorization: `Bearer ${credentials.key}` } });
    expect(((await rest.json()) as { data: { company: { name: string } } }).data.company.name, 'the same record through the data API').to.equal('Over MCP');

    const updated = await tool(credentials.machine!, 'update_record', { object: 'companies', id: company.id, fields: { employees: 5 } });
    expect((updated.structuredContent as { data: { company: { employees: number } } }).data.company.employees).to.equal(5);
    const person = await tool(credentials.key!, 'create_record', { object: 'people', fields: { firstName: 'Ada', lastName: 'Lovelace', companyId: company.id } });
    expect(person.isError ?? false, person.content[0]?.text).to.equal(false);
    const listed = await tool(credentials.admin!, 'list_records', { object: 'people', limit: 1 });
    expect((listed.structuredContent as { totalCount: number }).totalCount).to.be.at.least(1);

    const deleted = await tool(credentials.admin!, 'delete_record', { object: 'companies', id: company.id });
    expect(deleted.isError ?? false).to.equal(false);
    const gone = await tool(credentials.admin!, 'get_record', { object: 'companies', id: company.id });
    expect(gone.isError).to.equal(true);
    expect(gone.content[0]!.text).to.match(/not_found/);
  });

  it('makes a create_record called again with the same idempotency_key once, and refuses the key with other fields', async () => {
    const args = { object: 'companies', fields: { name: 'Retried over MCP' }, idempotency_key: 'mcp-retry-1' };
    const first = await tool(credentials.key!, 'create_record', args);
    const again = await tool(credentials.key!, 'create_record', args);
    expect(again.isError ?? false, again.content[0]?.text).to.equal(false);
    expect(again.structuredContent).to.deep.equal(first.structuredContent);
    const listed = await fetch(`${server.issuer}/rest/companies?limit=100`, { headers: { authorization: `Bearer ${credentials.key}` } });
    const names = ((await listed.json()) as { data: { companies: Array<{ name: string }> } }).data.companies.map(({ name }) => name);
    expect(names.filter((name) => name === 'Retried over MCP')).to.have.length(1);

    const reused = await tool(credentials.key!, 'create_record', { ...args, fields: { name: 'Something else' } });
    expect(reused.isError).to.equal(true);
    expect(reused.content[0]!.text).to.match(/idempotency_key_reused/);
  });

  it('describes the objects the Core API serves, with their fields', async () => {
    const described = await tool(credentials.viewer!, 'describe_objects', {});
    const text = JSON.stringify(described.structuredContent);
    expect(text).to.include('companies').and.include('people').and.include('employees');
  });

  it('says what is wrong with bad input as a tool error, never a server error', async () => {
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['create_record', { object: 'companies', fields: { employees: 3 } }, /name/],
      ['create_record', { object: 'companies', fields: { name: 'X', employees: 'many' } }, /employees/],
      ['create_record', { object: 'companies', fields: { name: 'X', secret: 1 } }, /secret/],
      ['get_record', { object: 'companies', id: 'not-a-uuid' }, /./],
      ['get_record', { object: 'invoices', id: 'x' }, /object|invoices/],
      ['list_records', { object: 'companies', limit: 1000 }, /limit|100/],
    ];
    for (const [name, args, message] of cases) {
      const answer = await rpc('tools/call', { name, arguments: args }, credentials.admin);
      expect(answer.status, `${name} ${JSON.stringify(args)}`).to.equal(200);
      const result = answer.body.result as unknown as ToolResult | undefined;
      const said = result ? result.content[0]!.text : answer.body.error!.message;
      if (result) expect(result.isError, `${name} ${JSON.stringify(args)}: ${said}`).to.equal(true);
      expect(said, `${name} ${JSON.stringify(args)}`).to.match(message);
    }
    const unknownTool = await rpc('tools/call', { name: 'drop_database', arguments: {} }, credentials.admin);
    expect(unknownTool.status).to.equal(200);
    expect(JSON.stringify(unknownTool.body)).to.match(/drop_database/);
    const notJson = await post(mcpUrl, { authorization: `Bearer ${credentials.admin}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, '{"jsonrpc":');
    expect(notJson.status).to.equal(400);
  });

  it('refuses a call of an unknown tool, and params a method\'s schema refuses, with -32602 Invalid params under the request\'s id (MCP tools, "Error Handling"), not a tool result or an internal error', async () => {
    const listed = await rpc('tools/list', {}, credentials.admin);
    expect((listed.body.result as unknown as { tools: Array<{ name: string }> }).tools.map(({ name }) => name).sort()).to.deep.equal([...TOOL_NAMES].sort());
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['tools/call', { name: 'drop_database', arguments: {} }, /^Unknown tool: drop_database \(the tools are describe_objects, list_records/],
      ['tools/call', { name: 5, arguments: {} }, /^Invalid params: tools\/call params\.name: /],
      ['tools/call', { arguments: {} }, /^Invalid params: tools\/call params\.name: /],
      ['initialize', { capabilities: {}, clientInfo: { name: 'c', version: '1' } }, /^Invalid params: initialize params\.protocolVersion: /],
    ];
    for (const [method, params, message] of cases) {
      const answer = await rpc(method, params, credentials.admin);
      expect(answer.status, `${method} ${JSON.stringify(params)}`).to.equal(200);
      expect(answer.body, `${method} ${JSON.stringify(params)}`).to.deep.include({ jsonrpc: '2.0', id: 1 });
      expect(answer.body.error?.code, `${method} ${JSON.stringify(params)}`).to.equal(-32602);
      expect(answer.body.error?.message, `${method} ${JSON.stringify(params)}`).to.match(message);
    }
    // Arguments a known tool's input schema refuses stay a tool error, for the model to correct (MCP 2025-11-25).
    const badArguments = await rpc('tools/call', { name: 'list_records', arguments: { object: 'companies', limit: 1000 } }, credentials.admin);
    expect((badArguments.body.result as unknown as ToolResult | undefined)?.isError).to.equal(true);
  });

  it('refuses a __proto__ key in a call\'s arguments as the data API does, with -32602 Invalid params under the request\'s id, and creates nothing', async () => {
    const before = await tool(credentials.key!, 'list_records', { object: 'companies', limit: 100 });
    const body = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_record","arguments":{"object":"companies","fields":{"name":"Proto Co","__proto__":{"admin":true}}}}}';
    const answer = await send(credentials.key!, body, '2025-11-25');
    expect(answer.status).to.equal(200);
    expect(JSON.parse(answer.text)).to.deep.equal({ jsonrpc: '2.0', id: 7, error: { code: -32602, message: 'Invalid params: __proto__: no object has such a field' } });
    const after = await tool(credentials.key!, 'list_records', { object: 'companies', limit: 100 });
    const total = (result: ToolResult) => (JSON.parse(result.content[0]!.text) as { totalCount: number }).totalCount;
    expect(total(after), 'nothing created').to.equal(total(before));
  });

  it('refuses a batch under MCP 2025-06-18 and later, which take one message per request, an empty batch under any version, and one reusing a request id; nothing of a refused batch runs', async () => {
    const { key } = await createApiKey(server, workspace);
    const batch = JSON.stringify([createCompany(1, 'Batched 1'), createCompany(2, 'Batched 2')]);
    for (const version of ['2025-11-25', '2025-06-18']) {
      const refused = await send(key, batch, version);
      expect(refused.status, version).to.equal(400);
      const body = JSON.parse(refused.text) as { error: { code: number; message: string }; id: unknown };
      expect(body.error.code, version).to.equal(-32600);
      expect(body.error.message, version).to.include('one JSON-RPC message per request');
      expect(body.id).to.equal(null);
    }
    for (const version of [undefined, '2025-03-26', '2025-11-25']) {
      const empty = await send(key, '[]', version);
      expect(empty.status, `[] under ${version ?? 'no version'}`).to.equal(400);
      expect((JSON.parse(empty.text) as { error: { code: number } }).error.code).to.equal(-32600);
    }
    const sameId = await send(key, JSON.stringify([createCompany(3, 'Batched 3'), createCompany(3, 'Batched 4')]), '2025-03-26');
    expect(sameId.status, 'two requests under one id').to.equal(400);
    expect((JSON.parse(sameId.text) as { error: { code: number; message: string } }).error.message).to.include('the same id');
    const listed = await tool(key, 'list_records', { object: 'companies', limit: 100 });
    expect(JSON.stringify(listed.structuredContent), 'no record of a refused batch').to.not.include('Batched');
  });

  it('refuses a batch holding something that is no JSON-RPC message with -32600 Invalid Request (JSON-RPC 2.0 section 5.1), not a parse error; none of it runs', async () => {
    const { key } = await createApiKey(server, workspace);
    for (const [label, bad] of [['a number', 5], ['an object of no message', { foo: 1 }], ['a null id', { jsonrpc: '2.0', id: null, method: 'ping' }], ['a batch in a batch', [message(9, 'ping')]]] as const) {
      const refused = await send(key, JSON.stringify([createCompany(11, `Mixed batch ${label}`), bad]), '2025-03-26');
      expect(refused.status, label).to.equal(400);
      const body = JSON.parse(refused.text) as { error: { code: number; message: string } };
      expect(body.error.code, label).to.equal(-32600);
      expect(body.error.message, label).to.include('element 1 of the batch');
    }
    const listed = await tool(key, 'list_records', { object: 'companies', limit: 100 });
    expect(JSON.stringify(listed.structuredContent), 'no record of a refused batch').to.not.include('Mixed batch');
  });

  it('answers a batch under MCP 2025-03-26 (or with no version, which means it), one answer per message', async () => {
    for (const version of ['2025-03-26', undefined]) {
      const answered = await send(credentials.machine!, JSON.stringify([message(1, 'ping'), message(2, 'tools/list')]), version);
      expect(answered.status, version).to.equal(200);
      const answers = JSON.parse(answered.text) as Array<{ id: number; result: Record<string, unknown> }>;
      expect(answers.map(({ id }) => id).sort()).to.deep.equal([1, 2]);
      expect(answers.find(({ id }) => id === 2)!.result.tools).to.have.length(6);
    }
  });

  it('answers a batch holding one request with an array of its one answer (JSON-RPC 2.0 section 6), a notification beside it or not', async () => {
    const notification = { jsonrpc: '2.0', method: 'notifications/initialized' };
    for (const [id, batch] of [[21, [message(21, 'ping')]], [22, [message(22, 'ping'), notification]]] as const) {
      const answered = await send(credentials.machine!, JSON.stringify(batch), '2025-03-26');
      expect(answered.status, answered.text).to.equal(200);
      expect(JSON.parse(answered.text), JSON.stringify(batch)).to.deep.equal([{ jsonrpc: '2.0', id, result: {} }]);
    }
    const alone = await send(credentials.machine!, JSON.stringify(message(23, 'ping')), '2025-03-26');
    expect(JSON.parse(alone.text), 'a message sent alone is answered alone').to.deep.equal({ jsonrpc: '2.0', id: 23, result: {} });
  });

  it('answers a batch that also cancels one of its own requests, the request answered as if never cancelled (it would otherwise never be answered)', async () => {
    const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 5, reason: 'changed my mind' } };
    const batch = JSON.stringify([message(5, 'ping'), message(6, 'tools/list'), cancel]);
    const answered = await Promise.race([
      send(credentials.machine!, batch),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer within 10 s')), 10_000)),
    ]);
    expect(answered.status, answered.text).to.equal(200);
    const answers = JSON.parse(answered.text) as Array<{ id: number; result: Record<string, unknown> }>;
    expect(answers.map(({ id }) => id).sort()).to.deep.equal([5, 6]);
    expect(answers.find(({ id }) => id === 5)!.result).to.deep.equal({});

    const unrelated = await send(credentials.machine!, JSON.stringify([message(7, 'ping'), { ...cancel, params: { requestId: 99 } }]));
    // The SDK's transport answers a batch of one request with that request's answer alone.
    expect([JSON.parse(unrelated.text)].flat(), 'a cancellation of no request of the batch changes nothing').to.deep.equal([{ jsonrpc: '2.0', id: 7, result: {} }]);
  });

  it('refuses a body over 56 KiB (and under its 128 KiB) for what is wrong with it, not for its size; one over 128 KiB with 413', async () => {
    const padding = 'x'.repeat(60_000);
    const ping = JSON.stringify(message(1, 'ping', { padding }));
    const answered = await send(credentials.machine!, ping, '2025-11-25');
    expect(answered.status, answered.text).to.equal(200);

    const badVersion = await send(credentials.machine!, ping, '1999-01-01');
    expect(badVersion.status, badVersion.text).to.equal(400);
    expect(badVersion.text).to.include('Unsupported protocol version').and.not.include('larger than');
    const notJson = await send(credentials.machine!, ping.slice(0, -1), '2025-11-25');
    expect(notJson.status, notJson.text).to.equal(400);
    expect((JSON.parse(notJson.text) as { error: { code: number } }).error.code, 'a JSON-RPC parse error').to.equal(-32700);

    const huge = await send(credentials.machine!, JSON.stringify(message(1, 'ping', { padding: 'x'.repeat(140_000) })), '2025-11-25');
    expect(huge.status).to.equal(413);
    expect((JSON.parse(huge.text) as { error: { message: string } }).error.message).to.match(/131072 bytes/);
  });

  it('answers JSON that is not a JSON-RPC message with -32600 Invalid Request (JSON-RPC 2.0 section 5.1), keeping -32700 for text that is not JSON', async () => {
    for (const body of ['{"foo":1}', '{"jsonrpc":"1.0","id":1,"method":"ping"}', '"ping"', 'null', '{"jsonrpc":"2.0","id":null,"method":"ping"}']) {
      const answered = await send(credentials.machine!, body, '2025-11-25');
      expect(answered.status, body).to.equal(400);
      expect(JSON.parse(answered.text), body).to.deep.include({ jsonrpc: '2.0', id: null }).and.have.nested.property('error.code', -32600);
    }
    const notJson = await send(credentials.machine!, '{"jsonrpc":"2.0",', '2025-11-25');
    expect((JSON.parse(notJson.text) as { error: { code: number } }).error.code).to.equal(-32700);
  });

  it('refuses a body in a content coding with 415 naming the one it takes, rather than reading its bytes as JSON', async () => {
    const ping = JSON.stringify(message(1, 'ping'));
    // Refused by what the body says it is: a ping labelled gzip is refused as a gzip body would be.
    for (const coding of ['gzip', 'zstd']) {
      const answered = await post(mcpUrl, {
        'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${credentials.machine}`, 'content-encoding': coding,
      }, ping);
      expect([answered.status, answered.headers.get('accept-encoding')], coding).to.deep.equal([415, 'identity']);
    }
  });

  it('lets a viewer read but not write, and never reaches another workspace\'s records', async () => {
    const created = await tool(credentials.admin!, 'create_record', { object: 'companies', fields: { name: 'Private' } });
    const { id } = (created.structuredContent as { data: { company: { id: string } } }).data.company;
    const refused = await tool(credentials.viewer!, 'update_record', { object: 'companies', id, fields: { name: 'Changed' } });
    expect(refused.isError).to.equal(true);
    expect(refused.content[0]!.text).to.match(/viewer|role|permission|forbidden/i);
    expect((await tool(credentials.viewer!, 'get_record', { object: 'companies', id })).isError ?? false).to.equal(false);

    for (const [name, args] of [['get_record', { object: 'companies', id }], ['update_record', { object: 'companies', id, fields: { name: 'Stolen' } }], ['delete_record', { object: 'companies', id }]] as const) {
      const result = await tool(credentials.otherKey!, name, args);
      expect(result.isError, name).to.equal(true);
      expect(result.content[0]!.text, name).to.match(/not_found/);
    }
    const listed = await tool(credentials.otherKey!, 'list_records', { object: 'companies' });
    expect(JSON.stringify(listed.structuredContent)).to.not.include(id);
    const still = await tool(credentials.admin!, 'get_record', { object: 'companies', id });
    expect(JSON.stringify(still.structuredContent)).to.include('Private');
  });

  it('refuses a Host or an Origin that is not the service\'s (DNS rebinding) before authentication; allows the operator\'s origins', async () => {
    const host = new URL(server.issuer).host;
    const rebound = await rpc('tools/list', {}, credentials.admin, { host: 'evil.example' });
    expect(rebound.status).to.equal(403);
    expect(rebound.body.error!.message).to.match(/Host/);
    const foreignOrigin = await rpc('tools/list', {}, undefined, { origin: 'https://evil.example' });
    expect(foreignOrigin.status, 'refused before the 401').to.equal(403);
    expect(foreignOrigin.body.error!.message).to.match(/Origin/);
    // A JSON-RPC error has its members and no others: the OAuth errors' request_id is not added to it.
    expect(Object.keys(foreignOrigin.body).sort(), 'a JSON-RPC error as the SDK sends it').to.deep.equal(['error', 'id', 'jsonrpc']);
    for (const origin of [server.origin, 'https://host.example']) {
      const allowed = await rpc('tools/list', {}, credentials.admin, { origin, host });
      expect(allowed.status, origin).to.equal(200);
    }
    const port = new URL(server.origin).port;
    for (const local of [`localhost:${port}`, `127.0.0.1:${port}`, `LOCALHOST:${port}`]) {
      expect((await rpc('tools/list', {}, credentials.admin, { host: local })).status, `a client on this machine: ${local}`).to.equal(200);
    }
    expect((await rpc('tools/list', {}, credentials.admin, { host: 'localhost:1' })).status, 'another port').to.equal(403);
  });

  it('answers GET and DELETE with 405 Allow: POST: it is stateless, with no event stream to open and no session to end', async () => {
    for (const method of ['GET', 'DELETE']) {
      const answer = await fetch(mcpUrl, { method, headers: { authorization: `Bearer ${credentials.machine}`, accept: 'text/event-stream', 'mcp-protocol-version': '2025-11-25' } });
      expect([answer.status, answer.headers.get('allow')], method).to.deep.equal([405, 'POST']);
      expect(answer.headers.get('content-type'), method).to.match(/^application\/json/);
    }
  });

  it('is left in peace by a connected stock client (the SDK): it asks once for an event stream, takes the 405, and does not ask again', async () => {
    const gets: string[] = [];
    const counting: typeof fetch = async (url, init) => {
      if ((init?.method ?? 'GET') === 'GET') gets.push(String(url));
      return fetch(url, init);
    };
    const client = new Client({ name: 'test host', version: '1' });
    // Reconnecting after a tenth of a second, it would ask about ten times in the wait below if the stream closed at once.
    const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
      fetch: counting, requestInit: { headers: { authorization: `Bearer ${credentials.machine}` } },
      reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 100, reconnectionDelayGrowFactor: 1, maxRetries: 1000 },
    });
    await client.connect(transport);
    try {
      expect((await client.listTools()).tools).to.have.length(6);
      await sleep(1_000);
      expect(gets, 'GET requests to /mcp').to.have.length(1);
    } finally {
      await client.close();
    }
  });

  it('answers a browser-based host\'s preflight for its discovery requests, which carry MCP-Protocol-Version (protected resource and authorization server metadata)', async () => {
    for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-authorization-server']) {
      const preflight = await fetch(`${server.origin}${path}`, {
        method: 'OPTIONS',
        headers: { origin: 'https://host.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'mcp-protocol-version' },
      });
      expect(preflight.status, path).to.be.oneOf([200, 204]);
      expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase(), path).to.include('mcp-protocol-version');
    }
  });

  it('answers a CORS preflight from a browser-based host', async () => {
    const preflight = await fetch(mcpUrl, {
      method: 'OPTIONS',
      headers: { origin: 'https://host.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, mcp-protocol-version' },
    });
    expect(preflight.status).to.be.oneOf([200, 204]);
    expect(preflight.headers.get('access-control-allow-methods')).to.include('POST');
    expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).to.include('authorization').and.include('mcp-protocol-version');
  });
});

describe('the MCP endpoint (/mcp) behind a reverse proxy (TRUST_PROXY)', function () {
  this.timeout(30_000);
  let server: TestServer;
  let key: string;

  before(async () => {
    server = await startServer({ env: { TRUST_PROXY: 'true' } });
    const user = await seedUser(server, [{ workspace: 'Acme', role: 'admin' }]);
    key = (await createApiKey(server, user.workspaces[0]!.id)).key;
  });
  after(async () => {
    await server?.stop();
  });

  const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
  const sent = (headers: Record<string, string>) => post(`${server.origin}/mcp`, {
    authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers,
  }, ping);

  it('answers a request the proxy forwards under its upstream name, with the name the client asked for in X-Forwarded-Host', async () => {
    const answer = await sent({ host: 'oauth-upstream:3000', 'x-forwarded-host': new URL(server.issuer).host, 'x-forwarded-proto': 'http' });
    expect(answer.status, answer.text).to.equal(200);
  });

  it('refuses a rebound name the proxy reports in X-Forwarded-Host, though the proxy reaches the service on loopback', async () => {
    const answer = await sent({ host: `127.0.0.1:${new URL(server.origin).port}`, 'x-forwarded-host': 'evil.example' });
    expect(answer.status).to.equal(403);
    expect(answer.text).to.contain('Invalid Host header: evil.example');
  });
});

describe('the MCP endpoint (/mcp) at its limits: the rate limit per message, the store unavailable', function () {
  this.timeout(60_000);

  let server: TestServer;
  let mcpUrl: string;
  let workspace: string;

  before(async () => {
    server = await startServer({ env: { RATE_LIMIT_DATA_API: '5/1h' } });
    mcpUrl = `${server.issuer}/mcp`;
    workspace = (await seedUser(server, [{ workspace: 'MCP Limits', role: 'admin' }])).workspaces[0]!.id;
  });

  after(async () => {
    await server?.stop();
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.error(server.logs().split('\n').slice(-30).join('\n'));
  });

  function send(key: string, body: unknown, version?: string): Promise<{ status: number; headers: Headers; text: string }> {
    return post(mcpUrl, {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${key}`,
      ...(version ? { 'mcp-protocol-version': version } : {}),
    }, JSON.stringify(body));
  }

  async function companyNames(key: string): Promise<string[]> {
    const listed = await fetch(`${server.issuer}/rest/companies?limit=100`, { headers: { authorization: `Bearer ${key}` } });
    return ((await listed.json()) as { data: { companies: Array<{ name: string }> } }).data.companies.map(({ name }) => name);
  }

  it('counts each message of a batch against the credential\'s data API limit, as if each had come alone: 429 with Retry-After past it', async () => {
    const { key } = await createApiKey(server, workspace);
    const first = await send(key, [createCompany(1, 'Batch 1'), createCompany(2, 'Batch 2'), createCompany(3, 'Batch 3')], '2025-03-26');
    expect(first.status, first.text).to.equal(200);
    expect(JSON.parse(first.text)).to.have.length(3);

    const second = await send(key, [createCompany(1, 'Batch 4'), createCompany(2, 'Batch 5'), createCompany(3, 'Batch 6')], '2025-03-26');
    expect(second.status, 'three more than the five a credential has').to.equal(429);
    expect(Number(second.headers.get('retry-after'))).to.be.within(1, 3600);
    expect(JSON.parse(second.text)).to.include({ error: 'too_many_requests' });

    const rest = await fetch(`${server.issuer}/rest/companies`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"name":"Alone"}' });
    expect(rest.status, 'the data API counts with it').to.equal(429);
    const other = await createApiKey(server, workspace);
    expect((await companyNames(other.key)).filter((name) => name.startsWith('Batch')).sort(), 'only the first batch ran').to.deep.equal(['Batch 1', 'Batch 2', 'Batch 3']);
  });

  it('answers a tool call the store cannot complete (another process holds the SQLite write lock) as the data API does: 503 with Retry-After, logged, no internal text', async () => {
    const { key } = await createApiKey(server, workspace);
    const other = new DatabaseSync(server.store.replace(/^sqlite:/, ''));
    try {
      other.exec('BEGIN IMMEDIATE');
      const refused = await send(key, createCompany(1, 'While Locked'), '2025-11-25');
      expect(refused.status, refused.text).to.equal(503);
      expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
      const requestId = refused.headers.get('x-request-id')!;
      expect(JSON.parse(refused.text)).to.deep.equal({ error: 'temporarily_unavailable', error_description: 'the storage backend is unavailable; try again shortly', request_id: requestId });
      expect(refused.text).to.not.match(/SQLite|lock/i);
      const lines = await eventually('the request\'s log lines', () => {
        const found = linesOf(server, requestId);
        return found.some((line) => line.message === 'request') && found;
      }, 5_000);
      // An outage answered as designed is a warning, not an error (src/http/errors.ts, logOutage).
      expect(lines.find((line) => line.message === 'request failed'), 'a warning line with the detail').to.include({ level: 'warn', status: 503, path: '/mcp' })
        .and.have.property('detail').that.includes('write lock');
      expect(lines.find((line) => line.message === 'request'), 'the request log').to.include({ status: 503 });
    } finally {
      if (other.isTransaction) other.exec('ROLLBACK');
      other.close();
    }
    const retried = await send(key, createCompany(1, 'After The Lock'), '2025-11-25');
    expect(retried.status, retried.text).to.equal(200);
  });
});
