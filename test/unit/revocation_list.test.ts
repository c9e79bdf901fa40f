import { expect } from 'chai';

import { openStore } from '../../adapters/index.ts';
import { BackendUnavailableError, type Store } from '../../adapters/store.ts';
import { PROPAGATION_BOUND_MS } from '../../src/shared/propagation.ts';
import {
  CLOCK_MARGIN_SECONDS,
  RevocationList,
  TOKEN_REVOCATIONS_PER_OWNER,
  grantReference,
  type RevocableToken,
} from '../../src/tokens/revocation_list.ts';

/** A clock the test moves by hand, starting at the real time. */
function manualClock() {
  let now = Date.now();
  return { now: () => now, advance: (ms: number) => { now += ms; } };
}

let sequence = 0;
/** Claims of a token issued at `issuedAtMs`, living an hour, for a client and optionally a grant. */
function token(issuedAtMs: number, owner: { clientId: string; grantId?: string }): RevocableToken {
  sequence += 1;
  const iat = Math.floor(issuedAtMs / 1000);
  return {
    jti: `jti-${sequence}`,
    iat,
    exp: iat + 3600,
    client_id: owner.clientId,
    ...(owner.grantId ? { gid: grantReference(owner.grantId) } : {}),
  };
}

describe('revocation list (in-process mirror)', () => {
  let store: Store;
  let clock: ReturnType<typeof manualClock>;
  let list: RevocationList;

  beforeEach(async () => {
    store = openStore('memory:');
    clock = manualClock();
    list = new RevocationList(store.revocations, clock.now);
    await list.refresh();
  });

  afterEach(async () => {
    list.stop();
    await store.close();
  });

  it("refuses every token of a revoked grant, and no other grant's", async () => {
    const revoked = [token(clock.now(), { clientId: 'c1', grantId: 'g1' }), token(clock.now(), { clientId: 'c1', grantId: 'g1' })];
    const other = token(clock.now(), { clientId: 'c1', grantId: 'g2' });
    await list.revokeGrant('g1');
    for (const claims of revoked) expect(await list.isRevoked(claims)).to.equal(true);
    expect(await list.isRevoked(other)).to.equal(false);
  });

  it('refuses exactly the one token revoked under RFC 7009', async () => {
    const [first, second] = [token(clock.now(), { clientId: 'c1', grantId: 'g1' }), token(clock.now(), { clientId: 'c1', grantId: 'g1' })];
    await list.revokeToken(first);
    expect(await list.isRevoked(first)).to.equal(true);
    expect(await list.isRevoked(second)).to.equal(false);
  });

  it("refuses a deleted client's tokens, even one an instance with a stale copy of the client issues afterwards", async () => {
    const before = token(clock.now(), { clientId: 'gone' });
    await list.revokeDeletedClient('gone');
    clock.advance(PROPAGATION_BOUND_MS);
    const after = token(clock.now(), { clientId: 'gone' });
    expect(await list.isRevoked(before)).to.equal(true);
    expect(await list.isRevoked(after)).to.equal(true);
    expect(await list.isRevoked(token(clock.now(), { clientId: 'kept' }))).to.equal(false);
  });

  it('forgets an entry once no token it can match is alive, and keeps it until then', async () => {
    const claims = token(clock.now(), { clientId: 'c1' });
    await list.revokeToken(claims);
    const [entry] = (await store.revocations.changesSince(0)).entries;
    expect(entry!.expiresAt).to.equal(claims.exp + CLOCK_MARGIN_SECONDS);

    clock.advance((claims.exp - claims.iat) * 1000);
    await list.refresh();
    expect(list.size, 'kept while the token may still be accepted by a clock running behind').to.equal(1);
    expect(await list.isRevoked(claims)).to.equal(true);

    clock.advance((CLOCK_MARGIN_SECONDS + 11) * 1000);
    await list.refresh();
    expect(list.size).to.equal(0);
  });

  it('cannot be grown without bound by one client revoking its tokens in a loop', async () => {
    const flood = Array.from({ length: TOKEN_REVOCATIONS_PER_OWNER * 3 }, () => token(clock.now(), { clientId: 'flooder' }));
    for (const claims of flood) await list.revokeToken(claims);

    expect(list.size).to.be.at.most(TOKEN_REVOCATIONS_PER_OWNER + 1);
    expect((await store.revocations.changesSince(0)).entries).to.have.length.at.most(TOKEN_REVOCATIONS_PER_OWNER + 1);
    for (const claims of flood) expect(await list.isRevoked(claims), claims.jti).to.equal(true);

    clock.advance(1000);
    expect(await list.isRevoked(token(clock.now(), { clientId: 'flooder' })), 'a token issued after the flood').to.equal(false);
    expect(await list.isRevoked(token(clock.now() - 1000, { clientId: 'bystander' }))).to.equal(false);
  });

  it('bounds a client revoking its client_credentials tokens in a loop without touching its users\' tokens', async () => {
    const usersToken = token(clock.now(), { clientId: 'machine', grantId: 'g-user' });
    for (let i = 0; i <= TOKEN_REVOCATIONS_PER_OWNER; i += 1) await list.revokeToken(token(clock.now(), { clientId: 'machine' }));
    expect(await list.isRevoked(token(clock.now(), { clientId: 'machine' })), 'its own tokens issued until then').to.equal(true);
    expect(await list.isRevoked(usersToken), 'a user\'s token of the same client').to.equal(false);
  });

  it('past the bound, revokes a client\'s tokens issued until the one revoked, not those issued since (the token a refresh just gave)', async () => {
    const revokedLast = token(clock.now(), { clientId: 'rotating', grantId: 'g-rotating' });
    for (let i = 0; i < TOKEN_REVOCATIONS_PER_OWNER; i += 1) await list.revokeToken(token(clock.now(), { clientId: 'rotating', grantId: 'g-rotating' }));
    clock.advance(5000);
    const issuedSince = token(clock.now(), { clientId: 'rotating', grantId: 'g-rotating' });
    await list.revokeToken(revokedLast);
    expect(await list.isRevoked(revokedLast), 'the token revoked').to.equal(true);
    expect(await list.isRevoked(issuedSince), 'a token issued after it, before the revocation').to.equal(false);
  });

  it('learns what another instance revoked on its next refresh, and refreshes before answering when its copy is stale', async () => {
    const other = new RevocationList(store.revocations, clock.now);
    await other.refresh();
    const claims = token(clock.now(), { clientId: 'c1', grantId: 'g1' });
    expect(await other.isRevoked(claims)).to.equal(false);

    await list.revokeGrant('g1');
    clock.advance(PROPAGATION_BOUND_MS + 1);
    // No timer ran: the stale copy makes the check read the store itself.
    expect(await other.isRevoked(claims)).to.equal(true);
  });

  it('fails closed when its copy is stale and the store does not answer', async () => {
    const claims = token(clock.now(), { clientId: 'c1' });
    await store.close();
    clock.advance(PROPAGATION_BOUND_MS + 1);
    let error: unknown;
    try {
      await list.isRevoked(claims);
    } catch (caught) {
      error = caught;
    }
    expect(error).to.be.instanceOf(BackendUnavailableError);
  });
});
