import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect } from 'chai';

import { openStore } from '../../adapters/index.ts';
import { BackendUnavailableError, type Store } from '../../adapters/store.ts';
import { Metrics } from '../../src/http/metrics/metrics.ts';
import { instrumentStore } from '../../src/http/metrics/store.ts';

/** A sample's value in the exposition text, by its exact name and labels as the scrape writes them. */
function sample(text: string, line: string): number | undefined {
  const found = text.split('\n').find((candidate) => candidate.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

/**
 * Every store operation is timed and its failures counted (store_operation_duration_seconds,
 * store_operation_errors_total), on a real SQLite store: the caller gets what the store answered,
 * a value or the same error, and the scrape counts both.
 */
describe('store operation metrics', () => {
  let folder: string;
  let opened: Store;

  beforeEach(() => {
    folder = mkdtempSync(join(tmpdir(), 'store-metrics-'));
    opened = openStore(`sqlite:${join(folder, 'oauth.sqlite')}`);
  });

  afterEach(async () => {
    await opened.close().catch(() => undefined);
    rmSync(folder, { recursive: true, force: true });
  });

  it('times each operation, and counts a failed one by its error while the caller gets that error', async () => {
    const metrics = new Metrics();
    const store = instrumentStore(opened, metrics);
    await store.model('Grant').upsert('grant-1', { accountId: 'user-1' }, 60);
    expect(await store.model('Grant').find('grant-1')).to.include({ accountId: 'user-1' });
    expect(await store.model('Grant').find('grant-2')).to.equal(undefined);
    await store.committed();

    await opened.close();
    const failure = await store.model('Grant').find('grant-1').then(() => undefined, (error: unknown) => error);
    expect(failure).to.be.instanceOf(BackendUnavailableError);

    const text = await metrics.scrape();
    expect(sample(text, 'store_operation_duration_seconds_count{facet="Grant",operation="upsert"}')).to.equal(1);
    // The failed lookup is timed too: three finds.
    expect(sample(text, 'store_operation_duration_seconds_count{facet="Grant",operation="find"}')).to.equal(3);
    expect(sample(text, 'store_operation_duration_seconds_bucket{le="+Inf",facet="Grant",operation="find"}')).to.equal(3);
    expect(sample(text, 'store_operation_duration_seconds_sum{facet="Grant",operation="find"}')).to.be.greaterThan(0);
    expect(sample(text, 'store_operation_errors_total{facet="Grant",operation="find",error="BackendUnavailableError"}')).to.equal(1);
    expect(sample(text, 'store_operation_errors_total{facet="Grant",operation="upsert",error="BackendUnavailableError"}')).to.equal(undefined);
  });
});
