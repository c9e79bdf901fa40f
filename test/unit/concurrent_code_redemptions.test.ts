import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';

import { expect } from 'chai';
import { exportJWK, generateKeyPair } from 'jose';
import Koa from 'koa';
import mount from 'koa-mount';
import Provider, { type Adapter, type AdapterPayload } from 'oidc-provider';

import { openStore } from '../../adapters/index.ts';
import { CodeUsedByAnother, codeRedemptionRacesRevokeTheGrant } from '../../src/engine/concurrent_code_redemptions.ts';
import { GrantWorkspaces } from '../../src/grants/workspaces.ts';

/**
 * A code redemption the store refuses to use the code for (ModelStore.consume answers nothing):
 * another redemption used it at that moment, which ends the grant (RFC 6749 4.1.2); or the code
 * is gone (it expired that moment, or its grant was revoked), which ends nothing. The store says
 * the same in both cases, so the engine's own record of the code tells them apart. Run on a bare
 * engine whose records are in a Map, the consumption played as the store would answer it.
 */
describe('a code the store would not use up', () => {
  const records = new Map<string, AdapterPayload>();
  let consumption: 'taken by another' | 'gone' = 'taken by another';
  class MapAdapter implements Adapter {
    readonly #model: string;
    constructor(model: string) {
      this.#model = model;
    }
    async find(id: string) {
      return records.get(`${this.#model}:${id}`);
    }
    async upsert(id: string, payload: AdapterPayload) {
      records.set(`${this.#model}:${id}`, payload);
    }
    async findByUid() { return undefined; }
    async findByUserCode() { return undefined; }
    async consume(id: string) {
      const key = `${this.#model}:${id}`;
      if (consumption === 'gone') records.delete(key);
      else records.set(key, { ...records.get(key)!, consumed: Math.floor(Date.now() / 1000) });
      throw new CodeUsedByAnother();
    }
    async destroy(id: string) {
      records.delete(`${this.#model}:${id}`);
    }
    async revokeByGrantId(grantId: string) {
      for (const [key, payload] of records) if (payload.grantId === grantId) records.delete(key);
    }
  }

  let provider: Provider;
  let server: Server;
  let tokenUrl: string;
  before(async () => {
    provider = new Provider('http://127.0.0.1', {
      adapter: MapAdapter,
      jwks: { keys: [await exportJWK((await generateKeyPair('RS256', { extractable: true })).privateKey)] },
      features: { devInteractions: { enabled: false } },
      clientAuthMethods: ['client_secret_post'],
    });
    codeRedemptionRacesRevokeTheGrant(provider, new GrantWorkspaces(openStore('memory:').model(GrantWorkspaces.MODEL)));
    records.set('Client:c1', {
      client_id: 'c1', client_secret: 'a-secret-of-enough-length', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/cb'], token_endpoint_auth_method: 'client_secret_post',
    });
    server = new Koa().use(mount('/', provider as unknown as Koa)).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    tokenUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`;
  });
  after(() => server.close());

  /** A grant and a code of it, as the authorization endpoint leaves them; the grant's id and the exchange. */
  async function codeOfNewGrant(): Promise<{ grantId: string; redeem: () => Promise<Response> }> {
    const grant = new provider.Grant({ accountId: 'u1', clientId: 'c1' });
    grant.addOIDCScope('openid');
    const grantId = await grant.save();
    const verifier = randomBytes(32).toString('base64url');
    const client = (await provider.Client.find('c1'))!;
    const code = await new provider.AuthorizationCode({
      client, gty: 'authorization_code', accountId: 'u1', grantId, redirectUri: 'http://127.0.0.1/cb', scope: 'openid',
      codeChallenge: createHash('sha256').update(verifier).digest('base64url'), codeChallengeMethod: 'S256',
    }).save();
    const redeem = () => fetch(tokenUrl, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'authorization_code', code, redirect_uri: 'http://127.0.0.1/cb', code_verifier: verifier, client_id: 'c1', client_secret: 'a-secret-of-enough-length',
      }),
    });
    return { grantId, redeem };
  }

  it('used by another redemption at that moment: refused, and the grant ends', async () => {
    consumption = 'taken by another';
    const { grantId, redeem } = await codeOfNewGrant();
    const refused = await redeem();
    expect(refused.status).to.equal(400);
    expect(await refused.json()).to.include({ error: 'invalid_grant', error_description: 'grant request is invalid' });
    expect(records.has(`Grant:${grantId}`), 'the grant').to.equal(false);
  });

  it('gone (expired that moment, or its grant revoked): refused, and the grant is left as it is', async () => {
    consumption = 'gone';
    const { grantId, redeem } = await codeOfNewGrant();
    const refused = await redeem();
    expect(refused.status).to.equal(400);
    expect(await refused.json()).to.include({ error: 'invalid_grant' });
    expect(records.has(`Grant:${grantId}`), 'the grant').to.equal(true);
  });
});
