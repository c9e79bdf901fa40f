import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';

import { expect } from 'chai';
import { exportJWK, generateKeyPair } from 'jose';
import Koa from 'koa';
import mount from 'koa-mount';
import Provider, { type Adapter, type AdapterPayload } from 'oidc-provider';

import { clientOfRequest, findClientsOncePerRequest } from '../../src/engine/clients_per_request.ts';

/**
 * A host step that loads the request's client (clientOfRequest) before the engine saves the
 * engine its own lookup, and only within that request: a client changed between two requests is
 * seen as changed. Run on a bare engine, its client records in a Map that counts reads.
 */
describe('clients loaded once per request', () => {
  const records = new Map<string, AdapterPayload>();
  let clientReads = 0;
  class CountingAdapter implements Adapter {
    readonly #model: string;
    constructor(model: string) {
      this.#model = model;
    }
    async find(id: string) {
      if (this.#model === 'Client') clientReads += 1;
      return records.get(`${this.#model}:${id}`);
    }
    async upsert(id: string, payload: AdapterPayload) {
      records.set(`${this.#model}:${id}`, payload);
    }
    async findByUid() { return undefined; }
    async findByUserCode() { return undefined; }
    async consume() {}
    async destroy(id: string) {
      records.delete(`${this.#model}:${id}`);
    }
    async revokeByGrantId() {}
  }

  let server: Server;
  let tokenUrl: string;
  before(async () => {
    const provider = new Provider('http://127.0.0.1', {
      adapter: CountingAdapter,
      jwks: { keys: [await exportJWK((await generateKeyPair('RS256', { extractable: true })).privateKey)] },
      features: { clientCredentials: { enabled: true }, devInteractions: { enabled: false } },
      clientAuthMethods: ['client_secret_post'],
      ttl: { ClientCredentials: 60 },
    });
    findClientsOncePerRequest(provider);
    const host = new Koa();
    // A step before the engine that needs the client, as the FAPI check does.
    host.use(async (ctx, next) => {
      const clientId = ctx.get('X-Client-Id');
      if (clientId) await clientOfRequest(provider, ctx, clientId);
      await next();
    });
    host.use(mount('/', provider as unknown as Koa));
    server = host.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    tokenUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`;
  });
  after(() => server.close());

  const storeClient = (secret: string) => records.set('Client:c1', {
    client_id: 'c1', client_secret: secret, grant_types: ['client_credentials'], response_types: [], redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_post',
  });
  const tokenRequest = (secret: string, loadedBefore: boolean) => fetch(tokenUrl, {
    method: 'POST',
    headers: loadedBefore ? { 'X-Client-Id': 'c1' } : {},
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'c1', client_secret: secret }),
  });

  it('reads the client once for a request whose host step loaded it, as often as the engine alone does', async () => {
    storeClient('first-secret');
    clientReads = 0;
    expect((await tokenRequest('first-secret', false)).status).to.equal(200);
    const engineAlone = clientReads;
    clientReads = 0;
    expect((await tokenRequest('first-secret', true)).status).to.equal(200);
    expect(engineAlone).to.equal(1);
    expect(clientReads).to.equal(engineAlone);
  });

  it('reads the client again on the next request, so a change made in between is seen', async () => {
    storeClient('first-secret');
    expect((await tokenRequest('first-secret', true)).status).to.equal(200);
    storeClient('second-secret');
    const refused = await tokenRequest('first-secret', true);
    expect(refused.status).to.equal(401);
    expect(await refused.json()).to.include({ error: 'invalid_client' });
    expect((await tokenRequest('second-secret', true)).status).to.equal(200);
  });
});
