import { openStore } from '../../adapters/index.ts';
import { Accounts } from '../../src/accounts/accounts.ts';
import { registerClient } from '../../test/support/oauth.ts';
import { freePorts, runAdmin } from '../../test/support/server.ts';
import { authorize } from '../../test/support/user_agent.ts';
import { CodeMinter } from '../load/codes.ts';
import { onCleanUp, startNode, tempDir } from '../processes.ts';
import { SEED_LINE_PREFIX, seedUser, type BenchUser, type MemorySeedExtras } from './seed.ts';
import { storePlan, type StoreKind, type StorePlan } from './stores.ts';
import { type Target } from '../load/target.ts';
import { credentials } from '../load/credentials.ts';

export interface ServiceOptions {
  store: StoreKind;
  /** The service's LOG_LEVEL: warn by default, so the per-request log line is not part of what is measured. */
  logLevel: string;
  /** The service's WORKERS: processes serving the port. */
  workers: number;
  /**
   * `service_off`: with RATE_LIMITS=off and METRICS=off; `service_durable`: on the store's durable
   * variant (stores.ts); `service_rev`: as another commit has it, run from `root`.
   */
  side: 'service' | 'service_off' | 'service_durable' | 'service_rev';
  /** The copy of the repository the service runs from (other_commit.ts); this checkout by default. */
  root?: string;
}

/**
 * Starts the real service (`node src/main.ts`) on a free loopback port with its own store, seeds a
 * user and workspace, and registers the two clients the scenarios use: a workspace-bound
 * client_credentials client (through an initial access token) and an authorization_code client.
 * The data API scenarios' API key is made when first asked for (`dataApiKey`).
 */
export async function startService(options: ServiceOptions): Promise<Target> {
  const plan = await storePlan(options.store, await tempDir('oauth-bench-'), options.side === 'service_durable');
  onCleanUp(plan.stop);
  // The metrics listener too gets a free port, not the default another process may hold; both
  // are picked together, so they are never the same port (the service refuses to start then).
  const [port, metricsPort] = await freePorts(2) as [number, number];
  const issuer = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    PORT: String(port),
    HOST: '127.0.0.1',
    BASE_URL: issuer,
    STORE: plan.url,
    METRICS_PORT: String(metricsPort),
    LOG_LEVEL: options.logLevel,
    WORKERS: String(options.workers),
    // The load is one address, one client and one credential: limits it never reaches, still counted, so their cost is measured.
    RATE_LIMIT_TOKEN_CLIENT: '1000000000/1m',
    RATE_LIMIT_TOKEN_ADDRESS: '1000000000/1m',
    RATE_LIMIT_DATA_API: '1000000000/1m',
    ...(options.side === 'service_off' ? { RATE_LIMITS: 'off', METRICS: 'off' } : {}),
    ...plan.env,
  };
  const server = await startNode(options.side, plan.nodeArgs, env, `${issuer}/healthz`, options.root);
  const { user, initialAccessToken, dataApiKey } = plan.seededFromOutside
    ? await seedFromOutside(plan, env, options.root)
    : await seedReportedBy(server.output);

  const workspaceClient = credentials(await registerClient(issuer, {
    client_name: 'Bench workspace client', grant_types: ['client_credentials'], redirect_uris: [],
  }, initialAccessToken));
  const codeClient = credentials(await registerClient(issuer, { client_name: 'Bench code client' }));
  const codes = new CodeMinter(issuer, codeClient, (agent, url, origin) => authorize(agent, url, origin, user));

  return {
    side: options.side,
    issuer,
    process: server,
    workspaceClient,
    codeClient,
    codes,
    introspectableResource: undefined,
    userinfoScope: 'api profile',
    dataApiKey,
  };
}

interface Seed {
  user: BenchUser;
  initialAccessToken: string;
  /** Only the data API scenarios need a key, so it is made on first use: a store without API keys fails those alone. */
  dataApiKey: () => Promise<string>;
}

/** `make` run on the first call only; every call gets its one answer. */
function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => (made ??= make());
}

/** As the tests do: the user straight into the store the server reads live, the initial access token from the admin CLI. */
async function seedFromOutside(plan: StorePlan, env: Record<string, string>, root: string | undefined): Promise<Seed> {
  const store = openStore(plan.url);
  let user: BenchUser;
  try {
    user = await seedUser(new Accounts(store.accounts));
  } finally {
    await store.close();
  }
  const result = await runAdmin(env, ['iat', 'create', '--workspace', user.workspaceId, '--json'], undefined, root);
  if (result.code !== 0) throw new Error(`admin iat create failed (${result.code}): ${result.stderr}`);
  const { initial_access_token: initialAccessToken } = JSON.parse(result.stdout) as { initial_access_token: string };
  return { user, initialAccessToken, dataApiKey: once(() => createApiKey(env, user.workspaceId, root)) };
}

/** An API key of the workspace, from the admin CLI (`api-key create --json`), as an operator makes one. */
async function createApiKey(env: Record<string, string>, workspaceId: string, root: string | undefined): Promise<string> {
  const result = await runAdmin(env, ['api-key', 'create', '--workspace', workspaceId, '--name', 'bench', '--json'], undefined, root);
  if (result.code !== 0) throw new Error(`admin api-key create failed (${result.code}): ${result.stderr}`);
  const { key } = JSON.parse(result.stdout) as { key?: unknown };
  if (typeof key !== 'string') throw new Error(`admin api-key create printed no key: ${result.stdout}`);
  return key;
}

/** bench/service/memory_preload.ts seeds the service's memory store from inside and prints what it made. */
async function seedReportedBy(output: () => string): Promise<Seed> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const line = output().split('\n').find((candidate) => candidate.startsWith(SEED_LINE_PREFIX));
    if (line) {
      const { initialAccessToken, apiKey, apiKeyError, ...user } = JSON.parse(line.slice(SEED_LINE_PREFIX.length)) as BenchUser & MemorySeedExtras;
      const dataApiKey = async () => {
        if (apiKey === undefined) throw new Error(`the memory-store service made no API key: ${apiKeyError ?? 'no reason given'}`);
        return apiKey;
      };
      return { user, initialAccessToken, dataApiKey };
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the memory-store service did not report its seed:\n${output()}`);
}
