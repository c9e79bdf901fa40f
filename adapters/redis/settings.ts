import type { SettingStore } from '../store.ts';
import { Script, type RedisConnection } from './connection.ts';
import type { RedisKeys } from './keys.ts';

/** KEYS: settings hash. ARGV: name, value. Returns the stored value: the first writer's. */
const setIfAbsent = new Script(`
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
return redis.call('HGET', KEYS[1], ARGV[1])
`);

/** KEYS: settings hash. ARGV: name, expected value, new value. Returns 1 when it replaced the value, 0 when it held another (or none). */
const compareAndSetSetting = new Script(`
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
`);

/** Settings in one hash, without a TTL. */
export class RedisSettingStore implements SettingStore {
  readonly #redis: RedisConnection;
  readonly #keys: RedisKeys;

  constructor(redis: RedisConnection, keys: RedisKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  get(name: string) {
    return this.#redis.run(async (client) => (await client.hget(this.#keys.settings(), name)) ?? undefined);
  }

  async setIfAbsent(name: string, value: string) {
    const key = this.#keys.settings();
    return this.#redis.runDurable([key], async (client) => await setIfAbsent.run(client, [key], [name, value]) as string);
  }

  async put(name: string, value: string) {
    const key = this.#keys.settings();
    await this.#redis.runDurable([key], (client) => client.hset(key, name, value));
  }

  async compareAndSet(name: string, expected: string, value: string) {
    const key = this.#keys.settings();
    return this.#redis.runDurable([key], async (client) => await compareAndSetSetting.run(client, [key], [name, expected, value]) === 1);
  }
}
