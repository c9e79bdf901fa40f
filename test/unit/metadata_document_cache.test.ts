import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect } from 'chai';

import { openStore } from '../../adapters/index.ts';
import type { Store } from '../../adapters/store.ts';
import { LIFETIMES } from '../../config/lifetimes.ts';
import { MetadataDocuments } from '../../src/clients/metadata_documents.ts';
import type { SafeFetch } from '../../src/shared/safe_fetch.ts';

/**
 * The metadata document cache over a real SQLite file, with a clock the test moves and a document
 * server the test scripts: how long a document is kept (its max-age within the bounds), that a
 * failure is remembered briefly, that a stale copy stands in while its server fails (until the
 * upper bound) but not once the server says the document is gone, and that every instance on the store shares one fetch. Concurrent requests for a
 * new document are coalesced by the engine: test/http/metadata_documents.test.ts.
 */
describe('the metadata document cache', () => {
  const URL_A = 'https://client.example/a.json';
  const { minSeconds, maxSeconds, failureSeconds } = LIFETIMES.MetadataDocument;
  let dir: string;
  let store: Store;
  let now: number;
  let fetches: number;
  /** What the document's server does next: answer with this max-age, or fail. */
  let next: { maxAge?: string; fail?: boolean; body?: string; status?: number };

  const documentServer: SafeFetch = async () => {
    fetches += 1;
    if (next.fail) throw new Error('connection refused');
    return new Response(next.body ?? `{"client_id":"${URL_A}","n":${fetches}}`, { status: next.status ?? 200, headers: next.maxAge ? { 'cache-control': next.maxAge } : {} });
  };
  const documents = () => new MetadataDocuments(store.model(MetadataDocuments.MODEL), documentServer, { clock: () => now });
  const read = async (cache: MetadataDocuments) => {
    const response = await cache.fetch(URL_A);
    return { body: await response.json() as { n: number }, cacheControl: response.headers.get('cache-control') };
  };
  const advance = (seconds: number) => { now += seconds * 1000; };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cimd-cache-'));
    store = openStore(`sqlite:${join(dir, 'store.sqlite')}`);
    now = Date.now();
    fetches = 0;
    next = {};
  });

  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('says a public client\'s defaults on a document\'s behalf, and hands a key set over byte for byte', async () => {
    const cache = documents();
    next = { body: JSON.stringify({ client_id: URL_A, client_name: 'A', redirect_uris: ['http://127.0.0.1/cb'] }) };
    expect(await (await cache.fetch(URL_A)).json()).to.include({ token_endpoint_auth_method: 'none', application_type: 'native' });
    const keySet = '{ "keys": [ {"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"} ] }';
    next = { body: keySet };
    expect(await (await cache.fetch('https://client.example/jwks.json')).text()).to.equal(keySet);
  });

  it('keeps a document for its max-age, then fetches it again', async () => {
    next = { maxAge: 'public, max-age=600' };
    const cache = documents();
    expect((await read(cache)).body.n).to.equal(1);
    advance(599);
    const cached = await read(cache);
    expect(cached.body.n).to.equal(1);
    expect(cached.cacheControl, 'the engine is told what is left').to.equal('max-age=1');
    advance(2);
    expect((await read(cache)).body.n).to.equal(2);
  });

  it('keeps a document at least the lower bound and at most the upper one, whatever its server says', async () => {
    const cache = documents();
    next = { maxAge: 'no-cache, max-age=0' };
    await read(cache);
    advance(minSeconds - 1);
    expect((await read(cache)).body.n, 'within the lower bound').to.equal(1);
    advance(2);
    next = { maxAge: `max-age=${maxSeconds * 30}` };
    expect((await read(cache)).body.n).to.equal(2);
    advance(maxSeconds - 1);
    expect((await read(cache)).body.n).to.equal(2);
    advance(2);
    expect((await read(cache)).body.n, 'past the upper bound').to.equal(3);
  });

  it('shares one fetch between instances on the same store', async () => {
    next = { maxAge: 'max-age=3600' };
    await read(documents());
    const other = documents();
    expect((await read(other)).body.n).to.equal(1);
    expect(fetches).to.equal(1);
  });

  it('remembers a failure briefly: no fetch again within the failure period, one after it', async () => {
    next = { fail: true };
    const cache = documents();
    for (let i = 0; i < 3; i += 1) {
      let failed = false;
      try {
        await read(cache);
      } catch {
        failed = true;
      }
      expect(failed).to.equal(true);
    }
    expect(fetches).to.equal(1);
    advance(failureSeconds + 1);
    next = {};
    expect((await read(cache)).body.n).to.equal(2);
  });

  it('serves the stale copy while its server answers 5xx, 408 or 429, but not once it answers that the document is gone (404, 410, a redirect)', async () => {
    const staleCopyServed = { 503: true, 408: true, 429: true, 404: false, 410: false, 302: false };
    for (const [status, served] of Object.entries(staleCopyServed).map(([code, expected]) => [Number(code), expected] as const)) {
      next = { maxAge: 'max-age=120' };
      const cache = documents();
      advance(maxSeconds);
      await read(cache);
      advance(121);
      next = { status };
      expect(await read(cache).then(() => true, () => false), `the stale copy once the server answers ${status}`).to.equal(served);
    }
  });

  it('serves the stale copy while its server fails, up to the upper bound, and no further', async () => {
    next = { maxAge: 'max-age=120' };
    const cache = documents();
    await read(cache);
    advance(121);
    next = { fail: true };
    const stale = await read(cache);
    expect(stale.body.n, 'the stale copy').to.equal(1);
    expect(fetches).to.equal(2);
    advance(maxSeconds - 121);
    let failed = false;
    try {
      await read(cache);
    } catch {
      failed = true;
    }
    expect(failed, 'past the upper bound the copy is not served').to.equal(true);
  });
});

/** When a document's redirect URIs appeared, kept with its copy for the consent rule (src/engine/redirect_uri_consent.ts). */
describe('the metadata document cache: when redirect URIs appeared', () => {
  const URL_B = 'https://client.example/b.json';
  const { minSeconds, maxSeconds } = LIFETIMES.MetadataDocument;
  let dir: string;
  let store: Store;
  let now: number;
  let redirectUris: string[];

  const documentServer: SafeFetch = async () => new Response(JSON.stringify({ client_id: URL_B, redirect_uris: redirectUris }), { status: 200 });
  const documents = () => new MetadataDocuments(store.model(MetadataDocuments.MODEL), documentServer, { clock: () => now });
  const seconds = () => Math.floor(now / 1000);
  const advance = (by: number) => { now += by * 1000; };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cimd-history-'));
    store = openStore(`sqlite:${join(dir, 'store.sqlite')}`);
    now = Date.now();
    redirectUris = ['https://app.example/cb'];
  });

  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('dates a URI a later version lists from the fetch that found it, keeps the others\' dates, and dates one listed again anew', async () => {
    const cache = documents();
    expect(await cache.redirectUriHistory(URL_B), 'nothing fetched yet').to.equal(undefined);
    await cache.fetch(URL_B);
    const began = seconds();
    expect(await cache.redirectUriHistory(URL_B)).to.deep.equal({ since: began, addedAt: {} });

    redirectUris = ['https://app.example/cb', 'https://other.example/cb'];
    advance(minSeconds + 1);
    await cache.fetch(URL_B);
    const added = seconds();
    expect(await cache.redirectUriHistory(URL_B)).to.deep.equal({ since: began, addedAt: { 'https://other.example/cb': added } });

    redirectUris = ['https://app.example/cb'];
    advance(minSeconds + 1);
    await cache.fetch(URL_B);
    redirectUris = ['https://app.example/cb', 'https://other.example/cb'];
    advance(minSeconds + 1);
    await cache.fetch(URL_B);
    expect(await cache.redirectUriHistory(URL_B)).to.deep.equal({ since: began, addedAt: { 'https://other.example/cb': seconds() } });
  });

  it('begins the history again once the copy is gone: what it cannot tell is never taken for older', async () => {
    const cache = documents();
    await cache.fetch(URL_B);
    advance(maxSeconds + 1);
    await cache.fetch(URL_B);
    expect((await cache.redirectUriHistory(URL_B))?.since).to.equal(seconds());
  });
});
