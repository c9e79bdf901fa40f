/**
 * A separate process consuming records of one store, for the contract case "exactly one of several
 * stores opened on the same backend wins", each in its own process as workers and instances are.
 * Prints "ready" once its store answers, waits for a line on stdin so every process starts
 * together, then prints the consume results as JSON.
 *
 * argv: storage URL, key prefix ('' none), model, comma-separated ids, and optionally a use limit:
 * then it counts a use of each record (ModelStore.countUse) instead of consuming it.
 */
import { once } from 'node:events';

import { openStore } from '../../adapters/index.ts';

const [url = '', keyPrefix = '', model = '', ids = '', useLimit] = process.argv.slice(2);
const store = openStore(url, keyPrefix ? { keyPrefix } : {});
await store.ping();
process.stdout.write('ready\n');
await once(process.stdin, 'data');
const results = await Promise.all(ids.split(',').map((id) => useLimit === undefined
  ? store.model(model).consume(id)
  : store.model(model).countUse(id, Number(useLimit))));
await store.committed();
process.stdout.write(`${JSON.stringify(results)}\n`);
await store.close();
