import { randomBytes } from 'node:crypto';

import { expect } from 'chai';

import { acknowledged } from '../support/drill.ts';
import { management, register, type RegisteredClient } from '../support/oauth.ts';
import type { RedisClient } from '../../adapters/redis/connection.ts';
import { keysUnder, rawRedis, redisCli, startRedis, startSentinel, type RedisServer } from '../support/redis.ts';
import { startServer, type TestServer } from '../support/server.ts';
import { eventually, sleep } from '../support/wait.ts';

/**
 * What the service does with a failover the sentinels announce but that does not go as a planned
 * one does (sentinel_failover.test.ts drills that): abandoned, left unfinished by a sentinel that
 * falls silent, or switched while another sentinel still names the old master. Real sentinels do
 * these only by chance, so the announcements come from plain Redis servers listed among the
 * sentinels of the URL: the service subscribes to every listed sentinel's channels, and asks the
 * real one where the master is (a plain server refuses SENTINEL, and the next one is asked).
 */
describe('Writes during a Sentinel failover that is abandoned, unfinished or half-known', function () {
  this.timeout(120_000);
  let sentinel: Awaited<ReturnType<typeof startSentinel>>;
  let announcer: RedisServer;
  let otherAnnouncer: RedisServer;
  let promoted: RedisServer;
  let joining: RedisServer;
  let moved: RedisServer;
  let service: TestServer;
  const publishers = new Map<RedisServer, RedisClient>();

  before(async () => {
    sentinel = await startSentinel(1);
    announcer = await startRedis();
    otherAnnouncer = await startRedis();
    promoted = await startRedis();
    joining = await startRedis();
    moved = await startRedis();
    const sentinels = sentinel.url.replace(/^redis\+sentinel:\/\//, '').split('/')[0];
    const url = `redis+sentinel://${sentinels},127.0.0.1:${announcer.port},127.0.0.1:${otherAnnouncer.port}/mymaster`;
    service = await startServer({ store: url, env: { KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64url'), RATE_LIMITS: 'off' } });
    // The subscriptions are made in the background at start: an announcement before them is heard by no one.
    for (const server of [announcer, otherAnnouncer]) {
      publishers.set(server, await rawRedis(`redis://127.0.0.1:${server.port}`));
      await eventually(`the service subscribed at port ${server.port}`, async () => Number((await redisCli(server.port, 'pubsub', 'numpat')).trim()) >= 1, 10_000, 50);
    }
  });

  after(async () => {
    for (const publisher of publishers.values()) publisher.disconnect();
    await service?.stop();
    for (const server of [moved, joining, promoted, otherAnnouncer, announcer]) await server?.stop();
    await sentinel?.stop();
  });

  const master = () => `master mymaster 127.0.0.1 ${sentinel.master.port}`;
  const announce = async (server: RedisServer, channel: string, message: string) => {
    expect(await publishers.get(server)!.publish(channel, message), `the service heard ${channel} from port ${server.port}`).to.equal(1);
  };
  const registration = (name: string) => register(service.issuer, { client_name: name });

  /** The service subscribes to `server` as to a sentinel, and holds writes while it announces a failover, until it abandons it. */
  async function expectFailoverHeardFrom(server: RedisServer): Promise<void> {
    await eventually(`the service subscribed at port ${server.port}`, async () => Number((await redisCli(server.port, 'pubsub', 'numpat')).trim()) >= 1, 10_000, 50);
    const publisher = await rawRedis(`redis://127.0.0.1:${server.port}`);
    try {
      expect(await publisher.publish('+failover-state-select-slave', master()), `the service heard port ${server.port}`).to.equal(1);
      expect((await registration('Registered While It Fails Over')).status).to.equal(503);
      await publisher.publish('-failover-abort-no-good-slave', master());
      expect((await registration('Registered Once It Abandoned The Failover')).status).to.equal(201);
    } finally {
      publisher.disconnect();
    }
  }

  it('holds a write while a failover is announced and makes it on the master once the same sentinel abandons the failover; another sentinel\'s abort ends nothing', async () => {
    await announce(announcer, '+failover-state-select-slave', master());
    // An abort heard from a sentinel that did not announce this failover is not its end.
    await announce(otherAnnouncer, '-failover-abort-no-good-slave', master());
    const refused = await registration('Registered After Another Sentinel Aborted');
    expect(refused.status, 'a write while the announcing sentinel has not abandoned its failover').to.equal(503);
    expect(refused.headers.get('retry-after'), 'its Retry-After').to.match(/^\d+$/);

    const held = registration('Registered Just Before The Abort');
    await sleep(300);
    await announce(announcer, '-failover-abort-no-good-slave', master());
    const answer = await held;
    expect(answer.status, 'the write held when the failover was abandoned').to.equal(201);
    const kept = await answer.json() as RegisteredClient;
    expect((await management(kept.registration_client_uri, kept.registration_access_token)).status, 'the client read back').to.equal(200);
    expect((await registration('Registered After The Abort')).status).to.equal(201);
  });

  it('lets writes go on by themselves when the announcing sentinel falls silent mid-failover', async () => {
    await announce(announcer, '+failover-state-select-slave', master());
    const announcedAt = Date.now();
    const refused = await registration('Registered Right After The Announcement');
    expect(refused.status, 'a write right after the announcement').to.equal(503);
    const accepted = await acknowledged('a write, with nothing more announced', () => registration('Registered Once The Sentinel Fell Silent'), 201, 30_000);
    console.log(`      writes went on ${((Date.now() - announcedAt) / 1000).toFixed(1)} s after a failover was announced and nothing followed`);
    const kept = await accepted.json() as RegisteredClient;
    expect((await management(kept.registration_client_uri, kept.registration_access_token)).status, 'the client read back').to.equal(200);
  });

  it('listens to a sentinel another announces as it joins, and holds writes while that one announces a failover', async () => {
    await announce(announcer, '+sentinel', `sentinel 0123456789abcdef0123456789abcdef01234567 127.0.0.1 ${joining.port} @ mymaster 127.0.0.1 ${sentinel.master.port}`);
    await expectFailoverHeardFrom(joining);
  });

  it('listens to a sentinel at the new address another announces for it', async () => {
    await announce(announcer, '+sentinel-address-switch', `master mymaster 127.0.0.1 ${sentinel.master.port} ip 127.0.0.1 port ${moved.port} for 89abcdef0123456789abcdef0123456789abcdef`);
    await expectFailoverHeardFrom(moved);
  });

  it('forgets a sentinel it was told of once none lists it and it cannot be reached, asking again when a named sentinel reconnects', async () => {
    await announce(announcer, '+sentinel', `sentinel 0123456789abcdef0123456789abcdef01234567 127.0.0.1 ${joining.port} @ mymaster 127.0.0.1 ${sentinel.master.port}`);
    await eventually(`the service subscribed at port ${joining.port}`, async () => Number((await redisCli(joining.port, 'pubsub', 'numpat')).trim()) >= 1, 10_000, 50);
    await joining.down();
    // The named sentinels' connections dropped: each asks the sentinels again once it is back.
    await redisCli(Number(sentinel.url.match(/:(\d+)[,/]/)![1]), 'client', 'kill', 'type', 'pubsub');
    await sleep(2000);
    await joining.up();
    await sleep(3000);
    expect(Number((await redisCli(joining.port, 'pubsub', 'numpat')).trim()), 'subscriptions at the forgotten address once it answers again').to.equal(0);
  });

  it('writes to the promoted master after a switch, though the sentinel it asks still names the old one', async () => {
    const oldMasterUrl = `redis://127.0.0.1:${sentinel.master.port}`;
    const promotedUrl = `redis://127.0.0.1:${promoted.port}`;
    const clientsOn = async (url: string) => (await keysUnder(url, 'oauth:m:Client:')).size;
    const onOldMaster = await clientsOn(oldMasterUrl);

    // The real sentinel was told nothing: asked where the master is, it names the old one.
    await announce(announcer, '+switch-master', `mymaster 127.0.0.1 ${sentinel.master.port} 127.0.0.1 ${promoted.port}`);
    expect((await redisCli(sentinel.master.port, 'role')).split('\n')[0], 'the old master still calls itself master').to.equal('master');
    const answer = await acknowledged('a registration after the switch', () => registration('Registered After The Switch'), 201);
    const kept = await answer.json() as RegisteredClient;

    expect({
      'clients on the promoted master': await clientsOn(promotedUrl),
      'clients added to the old master': await clientsOn(oldMasterUrl) - onOldMaster,
      'the client read back': (await management(kept.registration_client_uri, kept.registration_access_token)).status,
    }).to.deep.equal({
      'clients on the promoted master': 1,
      'clients added to the old master': 0,
      'the client read back': 200,
    });
  });
});

/** A sentinel the URL names by one address (a host name) and another lists by another (its IP) is listened to once. */
describe('A sentinel named by a host name and listed by its address', function () {
  this.timeout(60_000);
  let sentinel: Awaited<ReturnType<typeof startSentinel>>;
  let service: TestServer;
  let ports: number[];

  before(async () => {
    sentinel = await startSentinel(2);
    ports = sentinel.url.replace(/^redis\+sentinel:\/\//, '').split('/')[0]!.split(',').map((address) => Number(address.split(':')[1]));
    service = await startServer({ store: `redis+sentinel://localhost:${ports[0]}/mymaster`, env: { KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64url'), RATE_LIMITS: 'off' } });
  });

  after(async () => {
    await service?.stop();
    await sentinel?.stop();
  });

  it('is subscribed to once, also after the sentinels are asked again', async () => {
    const subscriptions = async (port: number) => (await redisCli(port, 'client', 'list')).split('\n').filter((line) => /\bpsub=[1-9]/.test(line)).length;
    await eventually('the service listening to the sentinel the URL does not name', async () => await subscriptions(ports[1]!) === 1, 20_000, 100);
    // Its connection to the named sentinel dropped: once back, it asks both sentinels, and the other lists the named one by its IP.
    await redisCli(ports[0]!, 'client', 'kill', 'type', 'pubsub');
    await eventually('the named sentinel listened to again', async () => await subscriptions(ports[0]!) >= 1, 10_000, 100);
    await sleep(2000);
    expect({ named: await subscriptions(ports[0]!), other: await subscriptions(ports[1]!) }).to.deep.equal({ named: 1, other: 1 });
  });
});
