import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect } from 'chai';
import { errors } from 'oidc-provider';

import { openStore } from '../../adapters/index.ts';
import { BackendUnavailableError, type ModelStore, type Store } from '../../adapters/store.ts';
import { HttpError } from '../../src/shared/http_error.ts';
import { RefreshTokenRotations, ROTATION_ABANDONED_AFTER_SECONDS } from '../../src/engine/refresh_tokens.ts';

/** A refusal's error, or undefined when the promise resolves. */
const refusal = (attempt: Promise<unknown>) => attempt.then(() => undefined, (error: unknown) => error);

/**
 * A rotation as the engine makes it (consume, then store the successor), on a real SQLite store,
 * with the failures a crash or a lost primary causes injected around it: the answer to a write that
 * was made, lost; a rotation abandoned and taken over by a retry.
 */
describe('refresh token rotations: a rotation is answered once, whatever answer the store loses', () => {
  let dir: string;
  let store: Store;
  let tokens: ModelStore;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rotations-'));
    store = openStore(`sqlite:${join(dir, 'rotations.sqlite')}`);
    tokens = store.model('RefreshToken');
    await tokens.upsert('presented', { grantId: 'g1' }, 600);
  });

  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** The engine's steps for one refresh token grant request, through `rotations`, then the token endpoint's last step for its answer. */
  async function rotate(rotations: RefreshTokenRotations, models: ModelStore, successor: string, request: object): Promise<void> {
    const claim = await models.consume('presented', rotations.abandonedBefore());
    if (!claim) throw new errors.InvalidGrant('grant already redeemed');
    await rotations.consumed('presented', claim);
    await rotations.store(successor, () => models.upsert(successor, { grantId: 'g1' }, 600));
    await rotations.finish(request, true);
  }

  it('completes a rotation whose completion was made and its answer lost: the successor is answered, the presented token spent', async () => {
    let lost = 0;
    // The store deletes the consumed token, and the answer never arrives (the primary died with it).
    const complete = async (id: string, claim: string) => {
      const completion = await tokens.complete(id, claim);
      if (lost === 0) {
        lost += 1;
        throw new BackendUnavailableError('connection lost');
      }
      return completion;
    };
    const losingAnswers = new Proxy(tokens, {
      get: (target, name: keyof ModelStore) => (name === 'complete' ? complete : target[name].bind(target)),
    });
    const request = {};
    await rotate(new RefreshTokenRotations(losingAnswers, () => request), losingAnswers, 'successor', request);
    expect(lost).to.equal(1);
    expect(await tokens.find('presented')).to.equal(undefined);
    expect(await tokens.find('successor')).to.include({ grantId: 'g1' });
  });

  it('completes a rotation whose completion was made and then refused, with every later write refused: a read finds the mark its own completion left', async () => {
    let completions = 0;
    // The primary applies the completion but cannot have it confirmed by its replicas, and refuses
    // every write after it until they catch up; it still serves reads.
    const complete = async (id: string, claim: string) => {
      completions += 1;
      if (completions === 1) await tokens.complete(id, claim);
      throw new BackendUnavailableError('the replicas did not confirm the write');
    };
    const refusingWrites = new Proxy(tokens, {
      get: (target, name: keyof ModelStore) => (name === 'complete' ? complete : target[name].bind(target)),
    });
    const request = {};
    await rotate(new RefreshTokenRotations(refusingWrites, () => request), refusingWrites, 'successor', request);
    expect(completions).to.equal(1);
    expect(await tokens.find('presented')).to.equal(undefined);
    expect(await tokens.find('successor')).to.include({ grantId: 'g1' });
  });

  it('refuses with 503 a rotation that could not complete in time, and gives the presented token back', async () => {
    let now = Date.now();
    // Each look at the clock finds a second gone by: the retries run out at once.
    const clock = () => (now += 1000);
    const refuse = () => Promise.reject(new BackendUnavailableError('the replicas did not confirm the write'));
    const refusingWrites = new Proxy(tokens, {
      get: (target, name: keyof ModelStore) => (name === 'complete' ? refuse : target[name].bind(target)),
    });
    const request = {};
    const refused = await refusal(rotate(new RefreshTokenRotations(refusingWrites, () => request, clock), refusingWrites, 'successor', request));
    expect(refused).to.be.instanceOf(BackendUnavailableError);
    expect(await tokens.find('successor')).to.equal(undefined);
    expect(await tokens.find('presented'), 'usable again').to.include({ grantId: 'g1' }).and.not.have.property('consumed');
  });

  it('answers a retry while a rotation may be under way with 503 and Retry-After, and lets it take over one abandoned; the abandoned one cannot complete', async () => {
    const cut = {};
    const retry = {};
    let now = Date.now();
    const clock = () => now;
    const cutRotations = new RefreshTokenRotations(tokens, () => cut, clock);
    const cutClaim = await tokens.consume('presented', cutRotations.abandonedBefore());
    await cutRotations.consumed('presented', cutClaim!);

    const retryRotations = new RefreshTokenRotations(tokens, () => retry, clock);
    const underWay = await refusal(Promise.resolve().then(async () => retryRotations.found((await tokens.find('presented'))!)));
    expect(underWay).to.be.instanceOf(HttpError).and.include({ status: 503, code: 'temporarily_unavailable' });
    expect(Number((underWay as HttpError).headers['Retry-After'])).to.be.within(1, ROTATION_ABANDONED_AFTER_SECONDS);

    now += (ROTATION_ABANDONED_AFTER_SECONDS + 1) * 1000;
    expect(retryRotations.found((await tokens.find('presented'))!), 'handed to the engine as unconsumed').to.not.have.property('consumed');
    await rotate(retryRotations, tokens, 'retry-successor', retry);
    expect(await tokens.find('retry-successor')).to.include({ grantId: 'g1' });

    // The cut request resumes, long after: it must not answer its own successor as well.
    await cutRotations.store('cut-successor', () => tokens.upsert('cut-successor', { grantId: 'g1' }, 600));
    const late = await refusal(cutRotations.finish(cut, true));
    expect(late).to.be.instanceOf(HttpError).and.include({ status: 400, code: 'invalid_grant' });
    expect(await tokens.find('cut-successor')).to.equal(undefined);
    expect(await tokens.find('retry-successor')).to.include({ grantId: 'g1' });
  });

  it('refuses with invalid_grant, and discards its successor, a rotation whose consumption another request holds when it completes', async () => {
    const request = {};
    const rotations = new RefreshTokenRotations(tokens, () => request);
    const claim = await tokens.consume('presented', rotations.abandonedBefore());
    await rotations.consumed('presented', claim!);
    // Another instance whose clock runs ahead takes it over at once.
    const other = await tokens.consume('presented', Math.floor(Date.now() / 1000) + 60);
    expect(other).to.be.a('string').and.not.equal(claim);

    await rotations.store('successor', () => tokens.upsert('successor', { grantId: 'g1' }, 600));
    const refused = await refusal(rotations.finish(request, true));
    expect(refused).to.be.instanceOf(HttpError).and.include({ status: 400, code: 'invalid_grant' });
    expect(await tokens.find('successor')).to.equal(undefined);
    expect(await tokens.find('presented'), 'still the other request\'s').to.have.property('consumed');
    expect(await tokens.complete('presented', other!)).to.equal('completed');
  });

  it('gives the presented token back, and discards the successor, when the answer is not the tokens (the request failed after the successor was stored)', async () => {
    const request = {};
    const rotations = new RefreshTokenRotations(tokens, () => request);
    const claim = await tokens.consume('presented', rotations.abandonedBefore());
    await rotations.consumed('presented', claim!);
    await rotations.store('successor', () => tokens.upsert('successor', { grantId: 'g1' }, 600));
    await rotations.finish(request, false);
    expect(await tokens.find('presented')).to.not.have.property('consumed');
    expect(await tokens.find('successor')).to.equal(undefined);
    // And once more, for a request that failed between the consumption and the successor.
    const again = {};
    const second = new RefreshTokenRotations(tokens, () => again);
    await second.consumed('presented', (await tokens.consume('presented', second.abandonedBefore()))!);
    await second.finish(again, false);
    expect(await tokens.find('presented')).to.not.have.property('consumed');
  });

  it('gives the presented token back when the successor cannot be stored, and only under its own claim', async () => {
    const request = {};
    const rotations = new RefreshTokenRotations(tokens, () => request);
    const claim = await tokens.consume('presented', rotations.abandonedBefore());
    await rotations.consumed('presented', claim!);
    const refused = await refusal(rotations.store('successor', () => Promise.reject(new BackendUnavailableError('write refused'))));
    expect(refused).to.be.instanceOf(BackendUnavailableError);
    expect(await tokens.find('presented')).to.not.have.property('consumed');
    expect(await tokens.find('successor')).to.equal(undefined);
  });
});
