/**
 * Preloaded into the service for `--store memory` (`node --import ./bench/service/memory_preload.ts src/main.ts`).
 * A memory store exists only inside the service's process, so the seeding the harness does from
 * outside for a file store happens in here instead, through the same public pieces: the user and
 * workspace with Accounts, the initial access token with the admin CLI (`iat create --json`), run
 * in this process against the service's own store, and an API key with ApiKeys (what the CLI's
 * `api-key create` calls). The service itself starts unchanged.
 * What was made is reported on stdout as one line: `bench-seed {...}`.
 */
import { registerHooks } from 'node:module';

import { Accounts } from '../../src/accounts/accounts.ts';
import { ApiKeys } from '../../src/api_keys/api_keys.ts';
import { SEED_LINE_PREFIX, seedUser, type MemorySeedExtras } from './seed.ts';

const ADAPTERS = new URL('../../adapters/index.ts', import.meta.url).href;
const SHIM = new URL('./shared_memory_store.ts', import.meta.url).href;
const ADMIN_CLI = new URL('../../src/cli/admin.ts', import.meta.url);

// Every importer of adapters/index.ts (the service, the admin CLI) gets the shim; the shim gets the real one.
registerHooks({
  resolve(specifier, context, nextResolve) {
    const resolved = nextResolve(specifier, context);
    return resolved.url === ADAPTERS && context.parentURL !== SHIM ? { ...resolved, url: SHIM } : resolved;
  },
});

const { sharedStoreOpened } = await import(SHIM) as typeof import('./shared_memory_store.ts');

// Not awaited: the service's start-up (which opens the store) runs only after this module has finished.
void sharedStoreOpened.then(async (store) => {
  const user = await seedUser(new Accounts(store.accounts));
  const initialAccessToken = await runAdminCli(['iat', 'create', '--workspace', user.workspaceId, '--json']);
  // For the data API scenarios; a failure here must not stop the others, so it is reported, not thrown.
  const extras: MemorySeedExtras = await new ApiKeys(store.apiKeys).create(user.workspaceId, 'bench').then(
    ({ key }) => ({ initialAccessToken, apiKey: key }),
    (error: unknown) => ({ initialAccessToken, apiKeyError: (error as Error).message }),
  );
  process.stdout.write(`${SEED_LINE_PREFIX}${JSON.stringify({ ...user, ...extras })}\n`);
}).catch((error: unknown) => {
  process.stderr.write(`bench seeding failed: ${(error as Error).stack ?? String(error)}\n`);
});

/** Runs the admin CLI once, in this process, and returns the initial access token it prints. */
async function runAdminCli(args: string[]): Promise<string> {
  const argv = process.argv;
  const write = process.stdout.write;
  let printed = '';
  process.stdout.write = ((chunk: string | Uint8Array) => {
    printed += chunk.toString();
    return true;
  }) as typeof process.stdout.write;
  try {
    // The CLI reads its arguments from process.argv as its module is evaluated.
    process.argv = [argv[0]!, ADMIN_CLI.pathname, ...args];
    await import(ADMIN_CLI.href);
    process.argv = argv;
    // Its command runs after the import resolves; its one write is the JSON answer.
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      try {
        return (JSON.parse(printed) as { initial_access_token: string }).initial_access_token;
      } catch {
        if (process.exitCode) throw new Error(`admin ${args.join(' ')} failed with ${process.exitCode}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    throw new Error(`admin ${args.join(' ')} printed no initial access token: ${printed}`);
  } finally {
    process.argv = argv;
    process.stdout.write = write;
  }
}
