import { expect } from 'chai';

import { storeLocation } from '../../adapters/index.ts';
import { isRedisUrl, parseRedisUrl } from '../../adapters/redis/url.ts';

describe('redis storage URLs', () => {
  it('reads host, port, database, TLS and percent-encoded credentials of one server', () => {
    expect(parseRedisUrl('redis://localhost')).to.deep.equal({ mode: 'standalone', node: { host: 'localhost', port: 6379 }, db: 0, tls: false });
    expect(parseRedisUrl('rediss://app%40x:p%2Fw%3Ad@[::1]:6380/3')).to.deep.equal({
      mode: 'standalone', node: { host: '::1', port: 6380 }, db: 3, tls: true, username: 'app@x', password: 'p/w:d',
    });
    expect(parseRedisUrl('redis://:only-password@h:1/')).to.deep.equal({ mode: 'standalone', node: { host: 'h', port: 1 }, db: 0, tls: false, password: 'only-password' });
  });

  it('reads the sentinels, master name and database of a Sentinel URL, defaulting to port 26379', () => {
    expect(parseRedisUrl('redis+sentinel://u:p@s1,s2:26380/my%20master/2')).to.deep.equal({
      mode: 'sentinel', sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 26380 }], name: 'my master', db: 2, username: 'u', password: 'p',
    });
  });

  it('reads the seed nodes of a cluster URL', () => {
    expect(parseRedisUrl('redis+cluster://n1:7000,n2:7001')).to.deep.equal({ mode: 'cluster', nodes: [{ host: 'n1', port: 7000 }, { host: 'n2', port: 7001 }] });
  });

  it('tells Redis URLs from others', () => {
    expect(['redis://h', 'rediss://h', 'redis+sentinel://h/m', 'redis+cluster://h'].every(isRedisUrl)).to.equal(true);
    expect(['sqlite:./x', 'memory:', 'redis:h', 'redis+foo://h'].some(isRedisUrl)).to.equal(false);
  });

  it('says where a store is without its credentials: every host, port and database named, a SQLite file by its absolute path', () => {
    expect(storeLocation('rediss://app%40x:p%2Fw%3Ad@[::1]:6380/3')).to.deep.equal({ url: 'rediss://[::1]:6380/3', description: 'the Redis store at rediss://[::1]:6380/3', credentials: true });
    expect(storeLocation('redis://localhost')).to.include({ url: 'redis://localhost:6379/0', credentials: false });
    expect(storeLocation('redis+sentinel://u:p@s1,s2:26380/my%20master/2').url).to.equal('redis+sentinel://s1:26379,s2:26380/my%20master/2');
    expect(storeLocation('redis+cluster://:secret@n1:7000,n2').url).to.equal('redis+cluster://n1:7000,n2:6379');
    expect(storeLocation('sqlite:/srv/oauth/data/oauth.sqlite')).to.deep.equal({
      url: 'sqlite:/srv/oauth/data/oauth.sqlite', description: 'the SQLite store at /srv/oauth/data/oauth.sqlite', credentials: false,
    });
  });
});
