/**
 * A separate process changing accounts of one store, for the contract case "of two admins demoting
 * each other at once, exactly one wins" across stores opened on the same backend (two SQLite
 * connections in one process would wait on each other's lock, see adapters/sqlite/connection.ts).
 * Prints "ready" once its store answers, waits for a line on stdin so every process starts
 * together, then prints as JSON "done" or the name of the error the change was refused with.
 *
 * argv: storage URL, key prefix ('' none), change (demote, remove or delete), user id, workspace id.
 */
import { once } from 'node:events';

import { openStore } from '../../adapters/index.ts';

const [url = '', keyPrefix = '', change = '', userId = '', workspaceId = ''] = process.argv.slice(2);
const store = openStore(url, keyPrefix ? { keyPrefix } : {});
await store.ping();
process.stdout.write('ready\n');
await once(process.stdin, 'data');
const changes: Record<string, () => Promise<unknown>> = {
  demote: () => store.accounts.putMembership({ userId, workspaceId, role: 'member' }),
  remove: () => store.accounts.removeMembership(userId, workspaceId),
  delete: () => store.accounts.deleteUser(userId),
};
const result = await changes[change]!().then(() => 'done', (error: unknown) => (error as Error).name);
await store.committed();
process.stdout.write(`${JSON.stringify(result)}\n`);
await store.close();
