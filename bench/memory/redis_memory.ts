/**
 * What the service keeps in Redis, per thing a user or client creates: runs real flows against the
 * service on a fresh redis-server, then sums MEMORY USAGE of every key by the kind of record it
 * holds. Usage: node bench/memory/redis_memory.ts [flows] [rotations]   (default 50 clients, each
 * grant's refresh token rotated 1000 times)
 */
import { codeRequest, exchangeCode, registerClient, tokenRequest, postCredentials } from '../../test/support/oauth.ts';
import { keysUnder, rawRedis, startRedis } from '../../test/support/redis.ts';
import { seedUser, startServer } from '../../test/support/server.ts';
import { UserAgent, authorize } from '../../test/support/user_agent.ts';

const flows = Number(process.argv[2] ?? 50);
const rotations = Number(process.argv[3] ?? 1000);
const redis = await startRedis();
const server = await startServer({ store: redis.url, env: { KEY_ENCRYPTION_KEY: Buffer.alloc(32, 5).toString('base64url'), LOG_LEVEL: 'warn', RATE_LIMITS: 'off' } });

try {
  const user = await seedUser(server);
  const clients = [];
  for (let i = 0; i < flows; i += 1) clients.push(await registerClient(server.issuer, { client_name: `Memory App ${i}` }));
  // One browser session and one grant (with its refresh token, rotated `rotations` times) per client.
  for (const client of clients) {
    const { url, verifier } = codeRequest(server.issuer, client.client_id);
    const callback = await authorize(new UserAgent(), url, server.origin, { email: user.email, password: user.password });
    const exchanged = await exchangeCode(server.issuer, client, callback.searchParams.get('code')!, verifier);
    let { refresh_token: refreshToken } = await exchanged.json() as { refresh_token: string };
    for (let i = 0; i < rotations; i += 1) {
      const rotated = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client) });
      ({ refresh_token: refreshToken } = await rotated.json() as { refresh_token: string });
    }
  }

  const raw = await rawRedis(redis.url);
  const bytes = new Map<string, { keys: number; bytes: number }>();
  for (const key of (await keysUnder(redis.url, '')).keys()) {
    // oauth:m:RefreshToken:<id> -> m:RefreshToken; oauth:grant:RefreshToken:<grant> -> grant:RefreshToken
    const kind = key.replace(/^oauth:/, '').split(':').slice(0, 2).join(':');
    const entry = bytes.get(kind) ?? { keys: 0, bytes: 0 };
    entry.keys += 1;
    entry.bytes += Number(await raw.memory('USAGE', key, 'SAMPLES', '0') ?? 0);
    bytes.set(kind, entry);
  }
  raw.disconnect();

  const sum = (...kinds: string[]) => kinds.reduce((total, kind) => total + (bytes.get(kind)?.bytes ?? 0), 0);
  const perFlow = (value: number) => `${Math.round(value / flows)} bytes`;
  process.stdout.write(`Redis ${await redisVersion()}, ${flows} clients, each with one session and one grant (refresh token rotated ${rotations} times)\n\n`);
  for (const [kind, { keys, bytes: size }] of [...bytes].sort()) process.stdout.write(`${kind.padEnd(32)} ${String(keys).padStart(5)} keys ${String(size).padStart(9)} bytes\n`);
  process.stdout.write(`\none client (with its registration access token): ${perFlow(sum('m:Client', 'list:Client', 'by:Client', 'm:RegistrationAccessToken', 'list:RegistrationAccessToken'))}\n`);
  process.stdout.write(`one grant with its refresh token:                 ${perFlow(sum('m:Grant', 'by:Grant', 'm:GrantWorkspace', 'grant:GrantWorkspace', 'm:GrantActivity', 'm:RefreshToken', 'grant:RefreshToken'))} (however often it rotated: a rotated-out refresh token is not kept)\n`);
  process.stdout.write(`one session:                                      ${perFlow(sum('m:Session', 'uid:Session'))}\n`);
  process.stdout.write(`per sign-in, gone within 10 minutes:              ${perFlow(sum('m:Interaction', 'm:AuthorizationCode', 'grant:AuthorizationCode'))} (interaction, code)\n`);
} finally {
  await server.stop();
  await redis.stop();
}

async function redisVersion(): Promise<string> {
  const raw = await rawRedis(redis.url);
  const info = await raw.info('server');
  raw.disconnect();
  return /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
}
